/**
 * `confboot verify` against nodes with real software TPMs (swtpm) booted like the demo image,
 * issuing qemu-vtpm documents through the production issuer, served by the real verification
 * service on loopback. Accepted: the registered node with the expected PCRs (and a joined node with
 * --cluster-id). Refused (exit 1): a node whose PCR was extended after boot, a software TPM whose AK
 * is not the registered one, a stand-in that replays a recorded answer (made for an older nonce),
 * and a stand-in that binds the caller's nonce under other user data (a document made for attested
 * TLS). Undecided (exit 3): nobody listening. A flood from one source is refused while an honest
 * caller from another source is answered.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { HttpAttestationFetcher } from '../../../src/adapters/http/verification-client.js';
import type { VerificationHttpServer } from '../../../src/adapters/http/verification-server.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Pcr15Marker } from '../../../src/adapters/tpm/pcr15-marker.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { parseEndpoint, run } from '../../../src/app/cli/verify.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { startVerificationService } from '../../../src/app/verification-service/serve.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { Logger } from '../../../src/ports/logger.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
} from '../../../src/testbed/demo/boot-measurements.js';
import { freePort } from '../../support/net.js';
import { captureStdio } from '../../support/stdio.js';

const io = captureStdio();
const silent = { debug() {}, info() {}, warn() {}, error() {}, child: () => silent } as unknown as Logger;
const clusterId = new Uint8Array(32).fill(0x42);

interface Node {
  issuer: Issuer;
  akPub: Uint8Array;
  endpoint: string;
}

const swtpms: SwtpmInstance[] = [];
const services: VerificationHttpServer[] = [];
const standIns: Server[] = [];
const nodes: Record<'good' | 'tampered' | 'impostor' | 'joined', Node> = {} as never;
let files: { dir: string; config: string; registry: string };

/** A node at `host`: swtpm booted like the demo image, then `after` (a tamper, a join). */
async function node(host: string, after?: (tpm: Tpm2ToolsTpm) => Promise<void>): Promise<Node> {
  const swtpm = await startSwtpm();
  swtpms.push(swtpm);
  const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  await measureBoot(tpm, GOOD_BOOT);
  await after?.(tpm);
  const issuer = createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') });
  const service = await startVerificationService(
    { issuer, clock: new SystemClock(), logger: silent },
    { listen: { host, port: 0 } },
  );
  services.push(service);
  return { issuer, akPub: await tpm.attestationKeyPublic(), endpoint: `${host}:${service.port}` };
}

beforeAll(async () => {
  nodes.good = await node('127.0.0.1');
  nodes.tampered = await node('127.0.0.2', (tpm) =>
    tpm.pcrEvent(12, new TextEncoder().encode('init=/bin/sh, after boot')),
  );
  nodes.impostor = await node('127.0.0.5');
  nodes.joined = await node('127.0.0.6', (tpm) => new Pcr15Marker(tpm).markBootstrapped(clusterId));
  const dir = await mkdtemp(join(tmpdir(), 'confboot-verify-'));
  files = { dir, config: join(dir, 'attestation.json'), registry: join(dir, 'registry.json') };
  await writeFile(files.config, JSON.stringify(expectedAttestationConfig()));
  const ak = (n: Node) => Buffer.from(n.akPub).toString('base64');
  await writeFile(
    files.registry,
    JSON.stringify({
      good: { ip: '127.0.0.1', attestationKeyPublic: ak(nodes.good) },
      tampered: { ip: '127.0.0.2', attestationKeyPublic: ak(nodes.tampered) },
      // The machine registered at 127.0.0.5 has the good node's AK; the software TPM there has not.
      registered: { ip: '127.0.0.5', attestationKeyPublic: ak(nodes.good) },
      joined: { ip: '127.0.0.6', attestationKeyPublic: ak(nodes.joined) },
    }),
  );
}, 120_000);

afterAll(async () => {
  for (const s of standIns) await new Promise<void>((r) => s.close(() => r()));
  for (const s of services) await s.close();
  for (const s of swtpms) await s.stop();
  if (files) await rm(files.dir, { recursive: true, force: true });
});

interface Envelope {
  exitCode: number;
  result: {
    verdict: string;
    failedCheck?: string;
    reason?: string;
    checks: Array<{ name: string; ok: boolean }>;
  };
}

async function verify(endpoint: string, ...extra: string[]): Promise<{ code: number; out: Envelope }> {
  io.clearStdout();
  const code = await run([
    ...['--endpoint', endpoint, '--variant', 'qemu-vtpm', '--attestation-config', files.config],
    ...(extra.includes('--trust-ak-as-carried') ? [] : ['--qemu-ak-registry', files.registry]),
    ...extra,
    '-o',
    'json',
  ]);
  return { code, out: JSON.parse(io.stdout()) as Envelope };
}

/** A stand-in on 127.0.0.1 answering every request with `answer(nonce)`. */
async function standIn(answer: (nonce: Buffer) => Promise<string>): Promise<string> {
  const server = createServer((req, res) => {
    const nonce = Buffer.from(
      new URL(req.url ?? '/', 'http://x').searchParams.get('nonce') ?? '',
      'base64url',
    );
    void answer(nonce).then((body) => res.end(body));
  });
  standIns.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('confboot verify (real swtpm, real verification service)', () => {
  it('accepts the registered node with the expected PCRs, printing every check', {
    timeout: 60_000,
  }, async () => {
    const { code, out } = await verify(nodes.good.endpoint);
    expect(code).toBe(0);
    expect(out.result.verdict).toBe('accepted');
    const names = out.result.checks.map((c) => c.name);
    expect(names[0]).toBe('endpoint');
    expect(names).toEqual(expect.arrayContaining(['measurements', 'user-data']));
    expect(out.result.checks.every((c) => c.ok)).toBe(true);
    io.clearStdout();
    expect(
      await run([
        '--endpoint',
        nodes.good.endpoint,
        '--variant',
        'qemu-vtpm',
        '--attestation-config',
        files.config,
        '--qemu-ak-registry',
        files.registry,
      ]),
    ).toBe(0);
    expect(io.stdout()).toMatch(
      /^verdict: ACCEPTED \(qemu-vtpm at 127\.0\.0\.1:\d+, answered from 127\.0\.0\.1\)/,
    );
    expect(io.stdout()).toMatch(/ok +user-data +binds "VerifyService"/);
  });

  it('refuses the node whose PCR 12 was extended after boot (exit 1, measurements)', {
    timeout: 60_000,
  }, async () => {
    const { code, out } = await verify(nodes.tampered.endpoint);
    expect(code).toBe(1);
    expect(out.result).toMatchObject({ verdict: 'refused', failedCheck: 'measurements' });
    expect(out.result.reason).toMatch(/PCR ?12/);
  });

  it('refuses a software TPM with the expected PCRs whose AK is not the registered one (exit 1)', {
    timeout: 60_000,
  }, async () => {
    const { code, out } = await verify(nodes.impostor.endpoint);
    expect(code).toBe(1);
    expect(out.result.reason).toMatch(/not the one registered for registered/);
    // Trusting the AK as carried (the explicit opt-in) accepts it, saying so.
    const carried = await verify(nodes.impostor.endpoint, '--trust-ak-as-carried');
    expect(carried.code).toBe(0);
    expect(io.stderr()).toContain('verify: SECURITY: --trust-ak-as-carried is set');
  });

  it('refuses a recorded answer replayed for a new nonce (exit 1)', { timeout: 60_000 }, async () => {
    const recorded = await new HttpAttestationFetcher().fetch(nodes.good.endpoint, Buffer.alloc(32, 1));
    const body = JSON.stringify({ data: Buffer.from(recorded.document).toString('base64') });
    const replay = await standIn(async () => body);
    const { code, out } = await verify(replay);
    expect(code).toBe(1);
    expect(out.result.verdict).toBe('refused');
    expect(out.result.failedCheck).toMatch(/extra-data|nonce/);
  });

  it("refuses a document binding the caller's nonce under other user data (an attested-TLS document)", {
    timeout: 60_000,
  }, async () => {
    const spkiHash = createHash('sha256').update('a TLS key').digest();
    const relay = await standIn(async (nonce) =>
      JSON.stringify({
        data: Buffer.from(await nodes.good.issuer.issue(spkiHash, nonce)).toString('base64'),
      }),
    );
    const { code, out } = await verify(relay);
    expect(code).toBe(1);
    expect(out.result.failedCheck).toBe('user-data');
  });

  it('a joined node passes only with its cluster ID (PCR 15 as the node lock marks it)', {
    timeout: 60_000,
  }, async () => {
    const fresh = await verify(nodes.joined.endpoint);
    expect(fresh.code).toBe(1);
    expect(fresh.out.result.reason).toMatch(/PCR ?15/);
    const hex = Buffer.from(clusterId).toString('hex');
    expect((await verify(nodes.joined.endpoint, '--cluster-id', hex)).code).toBe(0);
    expect((await verify(nodes.good.endpoint, '--cluster-id', hex)).code).toBe(1);
  });

  it('cannot decide when nobody listens (exit 3)', async () => {
    const { code, out } = await verify(`127.0.0.1:${await freePort()}`);
    expect(code).toBe(3);
    expect(out.result).toMatchObject({ verdict: 'undecided', failedCheck: 'endpoint' });
  });

  it('refuses a flood from one source while an honest caller from another source is answered', {
    timeout: 60_000,
  }, async () => {
    // The good node's TPM behind a gate: the flood's one quote runs until the test opens it, so
    // every other flood request arrives while a quote is in progress.
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const real = nodes.good.issuer;
    const gated: Issuer = {
      variant: real.variant,
      oid: real.oid,
      issue: async (userData, nonce, options) => {
        await gate;
        return real.issue(userData, nonce, options);
      },
    };
    const service = await startVerificationService(
      { issuer: gated, clock: new SystemClock(), logger: silent },
      { listen: { host: '127.0.0.1', port: 0 } },
    );
    services.push(service);
    const order: string[] = [];
    let settled = 0;
    let nineSettled!: () => void;
    const nine = new Promise<void>((r) => (nineSettled = r));
    const flood = Array.from(
      { length: 10 },
      () =>
        new Promise<number | 'closed'>((resolve) => {
          const done = (o: number | 'closed') => {
            order.push(`flood ${o}`);
            if (++settled === 9) nineSettled();
            resolve(o);
          };
          const req = request(
            {
              host: '127.0.0.1',
              port: service.port,
              path: `/?nonce=${Buffer.alloc(32, 3).toString('base64url')}`,
              agent: false,
              localAddress: '127.0.0.7',
            },
            (res) => {
              res.resume();
              res.on('end', () => done(res.statusCode ?? 0));
            },
          );
          req.on('error', () => done('closed'));
          req.end();
        }),
    );
    await nine;
    order.push('gate opened');
    const honest = verify(`127.0.0.1:${service.port}`).then((r) => {
      order.push(`honest ${r.code}`);
      return r;
    });
    open();
    const outcomes = await Promise.all(flood);
    expect((await honest).code).toBe(0);
    // Nine refused (429 for the requests, or the connection closed past the per-source cap) while
    // the one quote was held; that one answered once the gate opened; the honest caller accepted.
    expect(order.slice(0, 9).every((o) => o === 'flood 429' || o === 'flood closed')).toBe(true);
    expect(order.filter((o) => o === 'flood 429').length).toBeGreaterThan(0);
    expect(order[9]).toBe('gate opened');
    expect(outcomes.filter((o) => o === 200)).toHaveLength(1);
    expect(order).toContain('honest 0');
  });

  it.each([
    ['10.0.0.3', '10.0.0.3:8080'],
    ['10.0.0.3:30080', '10.0.0.3:30080'],
    ['node-1', 'node-1:8080'],
    ['fd00::3', '[fd00::3]:8080'],
    ['[fd00::3]:9', '[fd00::3]:9'],
    ['[fd00::3]', '[fd00::3]:8080'],
  ])('reads --endpoint %s as %s', (raw, want) => {
    expect(parseEndpoint(raw, 'endpoint')).toBe(want);
  });

  it.each(['', 'host:99999', 'a b', '[fd00::3'])('refuses --endpoint "%s" as a usage error', (raw) => {
    expect(() => parseEndpoint(raw, 'endpoint')).toThrow(/--endpoint: want HOST/);
  });

  it.each([
    [
      '--cluster-id for a variant without PCR 15',
      ['--variant', 'qemu-tdx', '--cluster-id', '42'.repeat(32)],
      /--cluster-id is for vTPM variants; qemu-tdx is tdx/,
    ],
    [
      'a --cluster-id that is not 32 bytes of hex',
      ['--variant', 'qemu-vtpm', '--trust-ak-as-carried', '--cluster-id', 'abc'],
      /--cluster-id: want 64 hex digits/,
    ],
    ['an unknown variant', ['--variant', 'dummy'], /--variant: want one of .*dummy is for tests only/],
  ])('refuses %s as a usage error (exit 2)', async (_name, args, message) => {
    const code = await run(['--endpoint', '127.0.0.1:1', '--attestation-config', files.config, ...args]);
    expect(code).toBe(2);
    expect(io.stderr()).toMatch(message);
  });

  it('needs the AK rule settled for qemu-vtpm: no registry and no opt-in is a usage error (exit 2), nothing asked', async () => {
    let asked = 0;
    const node = await standIn(async () => {
      asked++;
      return '{}';
    });
    const code = await run([
      '--endpoint',
      node,
      '--variant',
      'qemu-vtpm',
      '--attestation-config',
      files.config,
    ]);
    expect(code).toBe(2);
    expect(io.stderr()).toContain('qemu-vtpm needs the registered attestation keys');
    expect(asked).toBe(0);
  });
});
