/**
 * Attack family: SEV-SNP documents that make the verifier fetch from AMD KDS. An unauthenticated
 * peer sends an azure-sev-snp document WITHOUT its VCEK and with a chip ID of its choosing (a fresh
 * one per connection), so the validator would have to ask KDS for a VCEK before it can check the
 * report's signature. A local FAKE KDS (HTTP on loopback, through the real KdsCertFetcher) never
 * answers a VCEK request. Server: the real attested TLS listener with the real azure-sev-snp
 * validator (the SNP half on the REAL Azure report and certificates from the test vectors; the TPM
 * quote half is a STUB that returns the expected PCR, as in the SNP validator tests). Honest node:
 * real attested TLS, sending the real report with its VCEK and chain.
 * Asserted as outcomes and orderings, never durations:
 * - flood: while the attacker keeps 12 such connections open (re-opening every one the service
 *   refuses), the honest node is accepted, and at that moment the attacker still holds connections
 *   and KDS still holds its requests; attacker documents beyond the small VCEK budget are refused
 *   with a recoverable "retry later" reason;
 * - abandon: the attacker's connections whose verification waits on KDS hold both verification
 *   slots and then close; the honest node is accepted while those KDS requests are still open (the
 *   slots came back when the connections closed, not when KDS answered or a deadline fired).
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { AmdCertCache } from '../../src/adapters/attestation/snp/cert-cache.js';
import { KdsCertFetcher } from '../../src/adapters/attestation/snp/kds-fetcher.js';
import { SnpValidator } from '../../src/adapters/attestation/snp/validators.js';
import { attestSocket } from '../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener } from '../../src/adapters/grpc/atls/listener.js';
import { variantOid } from '../../src/app/registry/index.js';
import type { Issuer } from '../../src/ports/issuer.js';
import type { MeasurementPolicy } from '../../src/ports/measurement-policy.js';
import { rsaTpmtPublic } from '../adapters/attestation/snp/tpmt-fixture.js';
import { describeVectors, vec } from '../adapters/attestation/snp/vectors.js';
import { FakeClock } from '../fakes/fake-clock.js';

const LONG = 60_000;
// The connection deadlines are far beyond the test's own timeout: on a loaded machine the scenario
// may take a minute, and a deadline firing would release slots for the wrong reason (asserted below).
const NEVER = 600_000;
const PCR4 = new Uint8Array(32).fill(4);
/** Where chip_id sits in an SEV-SNP report. */
const CHIP_ID_OFFSET = 0x1a0;
const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** FAKE KDS: serves nothing for VCEKs (holds every request open); counts open requests. */
async function startHangingKds(): Promise<{ baseUrl: string; open: () => number; seen: () => number }> {
  const held = new Set<ServerResponse>();
  let seen = 0;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen++;
    if (req.url?.startsWith('/vcek/v1/')) {
      held.add(res);
      res.once('close', () => held.delete(res));
      return;
    }
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { baseUrl: `http://127.0.0.1:${port}`, open: () => held.size, seen: () => seen };
}

const runtime = () => vec('constellation/snp/runtimedata.bin');
const akPub = () =>
  rsaTpmtPublic(
    Buffer.from(
      (JSON.parse(runtime().toString('utf8')) as { keys: { n: string }[] }).keys[0]?.n ?? '',
      'base64url',
    ),
  );

/** An azure-sev-snp document around the real report; `attacker` drops the VCEK and picks a chip ID. */
function snpDocument(userData: Uint8Array, attacker: boolean): Uint8Array {
  const report = Buffer.from(vec('constellation/snp/attestation.bin'));
  if (attacker) randomBytes(64).copy(report, CHIP_ID_OFFSET);
  const info = Buffer.from(
    JSON.stringify({
      ReportSigner: attacker ? null : b64(vec('constellation/snp/vcek.pem')),
      CertChain: b64(vec('constellation/snp/certchain.pem')),
      AttestationReport: b64(report),
      Azure: { RuntimeData: b64(runtime()), MAAToken: '' },
      GCP: null,
    }),
  );
  return Buffer.from(
    JSON.stringify({
      Attestation: { ak_pub: b64(akPub()), quotes: [] },
      InstanceInfo: b64(info),
      UserData: b64(userData),
    }),
  );
}

const issuer = (attacker: boolean): Issuer => ({
  variant: 'azure-sev-snp',
  oid: variantOid('azure-sev-snp'),
  issue: async (userData) => snpDocument(userData, attacker),
});

const measurements: MeasurementPolicy = {
  compare: (actual) =>
    Buffer.from(actual.get(4) ?? []).equals(PCR4)
      ? []
      : [{ index: 4, expected: PCR4, actual: actual.get(4), warnOnly: false }],
};

/** The join service's side: the real listener and the real azure-sev-snp validator on a KDS cache. */
async function startService(clock: FakeClock, kdsUrl: string, maxConcurrentVerifications: number) {
  const cache = new AmdCertCache(new KdsCertFetcher({ baseUrl: kdsUrl, timeoutInMs: LONG }), clock, {
    fetchTimeoutInMs: LONG,
  });
  const validator = new SnpValidator('azure-sev-snp', {
    oid: variantOid('azure-sev-snp'),
    policy: {
      arks: { milan: vec('constellation/trust-anchors/amd-ark-milan.pem') },
      minimumTcb: { bl: 2, tee: 0, snp: 6, ucode: 93 },
    },
    measurements,
    // STUB vTPM quote verifier: the TPM half is not what this attack is about.
    verifyVtpmQuote: async () => ({
      pcrs: new Map([[4, PCR4]]),
      checks: [{ name: 'stub-tpm-quote', ok: true }],
    }),
    clock,
    certCache: cache,
  });
  const drops: string[] = [];
  const refusals: string[] = [];
  const accepted: string[] = [];
  const listener = new AttestedTlsListener(
    {
      validators: [validator],
      clock,
      handshakeTimeoutMs: NEVER,
      deadlines: { clientHelloMs: NEVER, tlsHandshakeMs: NEVER, attestationMs: NEVER, verdictMs: NEVER },
      maxConcurrentVerifications,
    },
    (socket, peer) => {
      accepted.push(peer.attestation?.variant ?? 'none');
      socket.destroy();
    },
  );
  listener.onDropped = (_a, reason) => drops.push(reason);
  listener.onRefused = (_a, err) => refusals.push(err.message);
  const port = await listener.listen('127.0.0.1', 0);
  cleanups.push(() => listener.close());
  return { listener, port, cache, drops, refusals, accepted };
}

/** One attested TLS client connection; `raw` lets the test abandon it. */
function connectClient(port: number, clock: FakeClock, attacker: boolean) {
  const raw: Socket = netConnect({ port, host: '127.0.0.1' });
  raw.on('error', () => {});
  const connected = new Promise<void>((resolve, reject) => {
    raw.once('connect', () => resolve());
    raw.once('close', () => reject(new Error('closed before connecting')));
  });
  const result = connected.then(() =>
    attestSocket(raw, 'client', { issuer: issuer(attacker), clock, handshakeTimeoutMs: NEVER }),
  );
  result.then(
    ({ socket }) => socket.destroy(),
    () => {},
  );
  return { raw, result };
}

/** Waits (bounded) until `condition` holds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!condition()) throw new Error(`never reached: ${what}`);
}

describeVectors('SEV-SNP documents without a VCEK against a hanging FAKE KDS', () => {
  it('flood: honest SNP nodes are accepted while the attacker keeps its connections open', async () => {
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const kds = await startHangingKds();
    const service = await startService(clock, kds.baseUrl, 4);
    let attacking = true;
    let attackerOpen = 0;
    let attackerSent = 0;
    const attackerErrors: string[] = [];
    const attackerSockets = new Set<Socket>();
    const loops = Array.from({ length: 12 }, async () => {
      while (attacking) {
        const c = connectClient(service.port, clock, true);
        attackerSockets.add(c.raw);
        attackerOpen++;
        attackerSent++;
        const err = await c.result.then(
          () => undefined,
          (e: unknown) => e,
        );
        attackerOpen--;
        attackerSockets.delete(c.raw);
        c.raw.destroy();
        if (err instanceof Error) attackerErrors.push(err.message);
      }
    });
    cleanups.push(async () => {
      attacking = false;
      for (const s of attackerSockets) s.destroy();
      await Promise.all(loops);
    });
    await until(() => attackerSent >= 12 && service.listener.verifying >= 2, 'attack established');

    const honest = await connectClient(service.port, clock, false).result.then(
      () => 'accepted',
      (e: unknown) => String(e),
    );
    // At the verdict the attack is still running: connections open, KDS requests still unanswered.
    const atVerdict = { attackerOpen, kdsOpen: kds.open() };
    expect(honest).toBe('accepted');
    await until(() => service.accepted.length === 1, 'the service handed the honest connection over');
    expect(service.accepted).toEqual(['azure-sev-snp']);
    expect(atVerdict.attackerOpen).toBeGreaterThan(0);
    expect(atVerdict.kdsOpen).toBeGreaterThan(0);
    // A second honest node, too.
    await connectClient(service.port, clock, false).result;
    await until(() => service.accepted.length === 2, 'the service handed the second connection over');
    expect(service.accepted).toEqual(['azure-sev-snp', 'azure-sev-snp']);
    // Attacker documents beyond the VCEK budget were refused at once: the attacker learns the check
    // only, the service's own record says why (retry later).
    expect(attackerErrors.some((m) => /check validator\): validator/.test(m))).toBe(true);
    expect(service.refusals.some((m) => /retry later/.test(m))).toBe(true);
    // KDS saw at most the budget, and no deadline fired.
    expect(kds.seen()).toBeLessThanOrEqual(2);
    expect(service.drops.filter((d) => d.endsWith('-timeout'))).toEqual([]);
  }, 120_000);

  it('abandon: verification slots held by documents waiting on KDS come back when their connections close', async () => {
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const kds = await startHangingKds();
    const service = await startService(clock, kds.baseUrl, 2);
    const attackers = [connectClient(service.port, clock, true), connectClient(service.port, clock, true)];
    cleanups.push(() => {
      for (const a of attackers) a.raw.destroy();
    });
    await until(() => service.listener.verifying === 2, 'both verification slots held by the attacker');
    for (const a of attackers) a.raw.destroy();
    await Promise.all(attackers.map((a) => a.result.catch(() => {})));

    const honest = await connectClient(service.port, clock, false).result.then(
      () => 'accepted',
      (e: unknown) => String(e),
    );
    const kdsOpenAtVerdict = kds.open();
    expect(honest).toBe('accepted');
    await until(() => service.accepted.length === 1, 'the service handed the honest connection over');
    expect(service.accepted).toEqual(['azure-sev-snp']);
    // KDS never answered: the slots were given back because the connections closed.
    expect(kdsOpenAtVerdict).toBeGreaterThan(0);
    expect(service.drops.filter((d) => d.endsWith('-timeout'))).toEqual([]);
  }, 120_000);
});
