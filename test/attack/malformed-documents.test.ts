/**
 * Attack family: garbage, truncated and oversized attestation documents against the real join
 * service validating qemu-vtpm. Oversized frames are refused from their header alone — the verdict
 * arrives before a single body byte was sent, so the service never buffers them (bounded memory,
 * answered at once rather than after 10 MB) — and the rest are refused by the document parser with
 * the exact check. Nothing is issued, every refusal is audited.
 */
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_DOCUMENT_BYTES,
  encodeAttestationFrame,
  FRAME_HEADER_BYTES,
} from '../../src/adapters/grpc/atls/protocol.js';
import { variantOid } from '../../src/app/registry/index.js';
import {
  attempt,
  closed,
  expectAuditedRefusal,
  expectIssued,
  expectRefused,
  rawTlsClient,
  readVerdict,
  snapshot,
} from './support/attack.js';
import { FixedDocumentIssuer, MutatingIssuer, type SwtpmNode, TruncatingIssuer } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

const TEN_MB = 10 * 1024 * 1024;
const QEMU_OID = variantOid('qemu-vtpm');

let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

async function expectDocumentRefused(document: () => Uint8Array, check: string, message?: RegExp) {
  const s = snapshot(target);
  const out = await attempt(target.endpoint, new FixedDocumentIssuer('qemu-vtpm', document));
  const [audit] = await expectRefused(target, s, out, { code: status.UNAVAILABLE, check });
  if (message) expect(audit?.detail).toMatch(message);
}

describe('garbage, truncated and oversized documents (qemu-vtpm join service)', () => {
  it('control: the real swtpm node gets a ticket', async () => {
    const s = snapshot(target);
    await expectIssued(target, s, await attempt(target.endpoint, node.issuer));
  });

  it('random bytes under the qemu-vtpm OID are refused: document-format', async () => {
    const garbage = randomBytes(4096);
    await expectDocumentRefused(() => garbage, 'document-format', /invalid JSON/);
  });

  it('an empty document under the qemu-vtpm OID is refused: document-format', async () => {
    await expectDocumentRefused(() => new Uint8Array(0), 'document-format');
  });

  it('a genuine document truncated to half its length is refused: document-format', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, new TruncatingIssuer(node.issuer, (n) => Math.floor(n / 2)));
    await expectRefused(target, s, out, { code: status.UNAVAILABLE, check: 'document-format' });
  });

  it('JSON of the wrong shape (Attestation is an array) is refused: document-format', async () => {
    const doc = new TextEncoder().encode('{"Attestation":[],"InstanceInfo":null,"UserData":""}');
    await expectDocumentRefused(() => doc, 'document-format', /Attestation is missing/);
  });

  it('a deeply nested JSON document just under the 1 MiB limit is refused: document-format', async () => {
    const depth = DEFAULT_MAX_DOCUMENT_BYTES / 2 - 16;
    const doc = new TextEncoder().encode(`${'['.repeat(depth)}${']'.repeat(depth)}`);
    await expectDocumentRefused(() => doc, 'document-format');
  });

  it('a genuine document padded with hundreds of copies of its SHA-256 quote (under 1 MiB) is refused: sha256-quote', async () => {
    const s = snapshot(target);
    const out = await attempt(
      target.endpoint,
      new MutatingIssuer(node.issuer, (d) => {
        const q = d.attestation.quotes[0] as (typeof d.attestation.quotes)[number];
        return { ...d, attestation: { ...d.attestation, quotes: Array.from({ length: 300 }, () => q) } };
      }),
    );
    const [audit] = await expectRefused(target, s, out, { code: status.UNAVAILABLE, check: 'sha256-quote' });
    expect(audit?.detail).toContain('300 sha256 quotes; want exactly one');
  });

  it('a 10 MB document from an attested TLS client is refused from the frame header: frame-size', async () => {
    const huge = Buffer.alloc(TEN_MB, 0x7b);
    await expectDocumentRefused(
      () => huge,
      'frame-size',
      /frame of \d+ bytes exceeds the limit of 1048641 bytes/,
    );
  });

  it('a frame announcing 10 MB is answered before a single body byte is sent (never buffered): frame-size', async () => {
    const { socket, frames } = await rawTlsClient(target.port);
    const port = socket.localPort as number;
    const s = snapshot(target);
    // Only lines since now: an earlier refused connection may have had the same local port.
    const linesBefore = target.logLines().length;
    const header = encodeAttestationFrame(QEMU_OID, new Uint8Array(0)).subarray(0, FRAME_HEADER_BYTES);
    header.writeUInt32BE(TEN_MB, 6);
    socket.write(header);
    const verdict = await readVerdict(frames);
    expect(verdict).toMatchObject({ accepted: false, check: 'frame-size' });
    // Pushing the 10 MB anyway ends in a closed connection, not in a validation.
    socket.write(Buffer.alloc(TEN_MB, 0x41));
    await closed(socket);
    await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-size',
      ports: [port],
    });
    expect(
      target
        .logLines()
        .slice(linesBefore)
        .filter((l) => l.check === 'document-format' && l.peer === `127.0.0.1:${port}`),
    ).toEqual([]);
  });

  it('a frame cut off mid-body (the client closes after 60 of 100 announced bytes) is refused: frame-format', async () => {
    const { socket } = await rawTlsClient(target.port);
    const port = socket.localPort as number;
    const s = snapshot(target);
    const frame = encodeAttestationFrame(QEMU_OID, new Uint8Array(100 - 1 - QEMU_OID.length).fill(0x20));
    socket.end(frame.subarray(0, FRAME_HEADER_BYTES + 60));
    await closed(socket);
    const [audit] = await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-format',
      ports: [port],
    });
    expect(audit?.detail).toBe('connection closed inside the frame body (60 of 100 bytes)');
  });
});
