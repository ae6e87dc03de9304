/**
 * Attack family: a flood of connections to a bootstrapping node's init server, which attests with
 * the node's one TPM. The node has a real swtpm (good boot) and runs the real init server
 * (createInitServer, real attested TLS on loopback, the production qemu-vtpm issuer on that TPM; the
 * Init handler itself is a STUB that no attested call reaches here). While the flood runs, the same
 * node asks the real join service (startTarget) for its join ticket, quoting with the same TPM.
 * Attackers: silent ones in their own thread (TCP only, or a complete TLS handshake and then
 * nothing, re-opened whenever the server closes them), then peers that send an ATTESTATION frame
 * ("none", as `confboot init` does) and close at once or wait. Quotes are counted at the TPM
 * (a counting proxy in front of the node's Tpm2ToolsTpm, init server side only).
 * Asserted as outcomes, counts and orderings, never durations:
 * - silent peers cost no TPM work at all (no quote, no AK read) while they are held;
 * - the node's own join succeeds on its first attempt while the flood is running;
 * - peers that speak and leave cost at most one quote at a time at the TPM (the issuance cap), and
 *   never more quotes than the frames they sent; the node's join still succeeds among them;
 * - work for peers that closed is dropped: with the TPM's queue busy with the node's own reads,
 *   three peers speak and close; no quote is completed for any of them.
 */
import { connect as netConnect } from 'node:net';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createQemuVtpmIssuer } from '../../src/adapters/attestation/vtpm/issuer.js';
import { encodeAttestationFrame } from '../../src/adapters/grpc/atls/protocol.js';
import type { AttestedGrpcServer } from '../../src/adapters/grpc/attested-server.js';
import { createInitServer } from '../../src/adapters/grpc/init-server.js';
import { variantOid } from '../../src/app/registry/index.js';
import type { Tpm } from '../../src/ports/tpm.js';
import { rawTlsClient } from '../support/raw-atls-client.js';
import { attempt, clock } from './support/attack.js';
import type { SwtpmNode } from './support/nodes.js';
import { type Slowloris, startSlowloris } from './support/slowloris.js';
import { startTargetWithNode, type Target } from './support/target.js';

/**
 * Counts what the init server's issuer asks the TPM for: every call, the quotes, how many quotes
 * are in the TPM's queue or running at once, and how many completed (a quote dropped from the queue
 * because its connection closed rejects instead).
 */
class QuoteCounter {
  calls = 0;
  /** Calls not settled yet. */
  pending = 0;
  started = 0;
  completed = 0;
  active = 0;
  maxActive = 0;
  wrap(tpm: Tpm): Tpm {
    return new Proxy(tpm, {
      get: (target, prop, receiver) => {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        const fn = value as (...a: unknown[]) => unknown;
        if (prop !== 'quote' && prop !== 'quoteBank')
          return async (...args: unknown[]) => {
            this.calls++;
            this.pending++;
            try {
              return await fn.apply(target, args);
            } finally {
              this.pending--;
            }
          };
        return async (...args: unknown[]) => {
          this.calls++;
          this.pending++;
          this.started++;
          this.active++;
          this.maxActive = Math.max(this.maxActive, this.active);
          try {
            const quote = await fn.apply(target, args);
            this.completed++;
            return quote;
          } finally {
            this.active--;
            this.pending--;
          }
        };
      },
    });
  }
}

let target: Target;
let node: SwtpmNode;
let init: AttestedGrpcServer;
let initPort: number;
const quotes = new QuoteCounter();
const attackers: Slowloris[] = [];

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
  init = createInitServer({
    issuer: createQemuVtpmIssuer(quotes.wrap(node.tpm), { oid: variantOid('qemu-vtpm') }),
    clock,
    // STUB handler: no attested Init call is made in this file.
    handler: {
      // biome-ignore lint/correctness/useYield: never called
      async *init() {
        throw new Error('STUB init handler: not part of this attack');
      },
    },
  });
  initPort = await init.listen('127.0.0.1', 0);
}, 60_000);

afterAll(async () => {
  await Promise.all(attackers.splice(0).map((a) => a.stop()));
  await init?.shutdown(100);
  await target?.stop();
  await node?.stop();
});

it('work queued for peers that closed is dropped before it runs', async () => {
  // The node's own TPM work fills the TPM's queue (the node reading its PCRs, 40 times).
  const own = Array.from({ length: 40 }, () => node.tpm.readPcrs([0]));
  const before = { calls: quotes.calls, completed: quotes.completed };
  const peers = await Promise.all([0, 1, 2].map(() => rawTlsClient(initPort, clock)));
  for (const p of peers) p.socket.write(encodeAttestationFrame('', new Uint8Array(0)));
  for (let i = 0; i < 500 && quotes.calls === before.calls; i++) await new Promise((r) => setTimeout(r, 10));
  expect(quotes.calls).toBeGreaterThan(before.calls);
  for (const p of peers) p.socket.destroy();
  await Promise.all(own);
  // Until the issuer's TPM calls have settled twice in a row (a quote follows the AK read).
  for (let quiet = 0, i = 0; i < 1000 && quiet < 2; i++) {
    await new Promise((r) => setTimeout(r, 20));
    quiet = quotes.pending === 0 && init.tls.pendingHandshakes === 0 ? quiet + 1 : 0;
  }
  expect(quotes.pending).toBe(0);
  expect(quotes.completed).toBe(before.completed);
}, 120_000);

it('silent peers cost no quote, and the node joins on its first attempt while they are held', async () => {
  const tcp = startSlowloris({ port: initPort, stage: 'tcp', addresses: ['127.0.210.1'], perAddress: 16 });
  const tls = startSlowloris({ port: initPort, stage: 'tls', addresses: ['127.0.210.2'], perAddress: 16 });
  attackers.push(tcp, tls);
  const before = quotes.calls;
  await tcp.untilHeld(16);
  await tls.untilHeld(16);

  const outcome = await attempt(target.endpoint, node.issuer);
  const during = [await tcp.stats(), await tls.stats()];
  expect(outcome.code).toBe(status.OK);
  expect(during.every((s) => s.running && s.held > 0)).toBe(true);
  // No TPM work at all (no quote, not even the AK read) for a peer that has not spoken.
  expect(quotes.calls).toBe(before);
  await Promise.all([tcp.stop(), tls.stop()]);
  expect(quotes.calls).toBe(before);
}, 120_000);

it('peers that speak and leave get at most one quote at a time, and the node still joins', async () => {
  let running = true;
  let framesSent = 0;
  let answered = 0;
  const speakers = Array.from({ length: 6 }, async (_, i) => {
    while (running) {
      const c = await rawTlsClient(initPort, clock).catch(() => undefined);
      if (c === undefined) continue;
      c.socket.write(encodeAttestationFrame('', new Uint8Array(0)));
      framesSent++;
      if (i % 2 === 0) {
        // Speak, then go away at once: the quote queued for this peer must not run for nobody.
        c.socket.destroy();
        await new Promise((r) => setImmediate(r));
        continue;
      }
      // Speak and wait for the answer (the node's document, or a refusal), then leave.
      const frame = await c.frames.next().catch(() => undefined);
      if (frame !== undefined) answered++;
      c.socket.destroy();
    }
  });
  // A raw client that connects and leaves at once, so the loops above have certainly begun.
  await new Promise<void>((resolve) => {
    const s = netConnect({ port: initPort, host: '127.0.0.1' }, () => {
      s.destroy();
      resolve();
    });
    s.on('error', () => resolve());
  });
  for (let i = 0; i < 500 && framesSent < 30; i++) await new Promise((r) => setTimeout(r, 20));

  const outcome = await attempt(target.endpoint, node.issuer);
  const speakingAtVerdict = running;
  running = false;
  await Promise.all(speakers);
  expect(outcome.code).toBe(status.OK);
  expect(speakingAtVerdict).toBe(true);
  expect(framesSent).toBeGreaterThanOrEqual(30);
  expect(answered).toBeGreaterThan(0);
  expect(quotes.maxActive).toBe(1);
  expect(quotes.started).toBeLessThanOrEqual(framesSent + 3);
}, 120_000);
