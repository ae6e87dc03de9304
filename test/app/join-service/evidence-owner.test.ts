/**
 * The evidence record keeps each node's issued ticket against refused requests for its disk: the
 * join service's guard (GuardedJoinCall over a stub join call) records decisions into the real
 * JSON-lines store and the real Kubernetes store (FAKE Kubernetes API server). A caller refused for
 * another node's disk UUID (join naming its own node, rejoin naming none) leaves the victim's
 * record, and its node name, as they were, so a dry run still warns that the new config would
 * refuse the victim.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../src/adapters/kubernetes/evidence-store.js';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../../src/adapters/ops/limits.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { JsonlEvidenceStore } from '../../../src/adapters/state/jsonl-evidence-store.js';
import { joinAuditSink } from '../../../src/app/join-service/audit-sink.js';
import { dryRun } from '../../../src/app/join-service/dry-run.js';
import { GuardedJoinCall } from '../../../src/app/join-service/guarded-join-call.js';
import { AttestationError, ConfbootError } from '../../../src/ports/errors.js';
import type { EvidenceStore } from '../../../src/ports/evidence-store.js';
import type { JoinCaller } from '../../../src/ports/join-call.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket } from '../../../src/ports/types.js';
import type { Validator } from '../../../src/ports/validator.js';
import { FakeKubeApi } from '../../adapters/kubernetes/fake-kube-api.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-evidence-owner-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const VICTIM_DISK = '0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0';
const VICTIM_PEER = '10.0.0.7:40000';

function caller(peer: string, document: number): JoinCaller {
  return {
    peer,
    variant: 'qemu-vtpm',
    attestation: {
      checks: [],
      warnings: [],
      userData: new Uint8Array(32).fill(document),
      nonce: new Uint8Array(32).fill(document),
      document: new Uint8Array([document]),
      oid: '1.3.9900.1.2',
    },
  };
}

const joinRequest = (): JoinTicketRequest => ({
  diskUuid: VICTIM_DISK,
  certificateRequest: new Uint8Array(8),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
});

/** The guard over a stub issuer that issues to the victim's address and refuses every other caller. */
function guard(store: EvidenceStore, clock: FakeClock): GuardedJoinCall {
  const diskBound = () =>
    new ConfbootError('permission-denied', 'the disk is bound to another instance', { reason: 'disk-bound' });
  return new GuardedJoinCall({
    inner: {
      issueJoinTicket: async (_request, c) =>
        c.peer === VICTIM_PEER
          ? { issued: true, ticket: {} as JoinTicket, nodeName: 'worker-victim' }
          : { issued: false, refusal: diskBound(), nodeName: 'worker-attacker' },
      issueRejoinTicket: async (_request, c) =>
        c.peer === VICTIM_PEER
          ? { issued: true, ticket: {} as RejoinTicket }
          : { issued: false, refusal: diskBound() },
    },
    rateLimit: new TokenBucketRateLimiter({ ratePerSecond: 100, burst: 100, clock }),
    slots: new ConcurrencyLimiter(8),
    metrics: new JoinServiceMetrics({ processMetrics: false }),
    audit: joinAuditSink({ logger: new FakeLogger(), clock, evidence: store }),
  });
}

/** A new config that refuses every document except the attacker's. */
const strictValidator: Validator = {
  variant: 'qemu-vtpm',
  oid: '1.3.9900.1.2',
  validate: async (document) => {
    if (document[0] === 2) return { userData: new Uint8Array(32).fill(2), warnings: [], checks: [] } as never;
    throw new AttestationError('measurements', 'PCR12: expected another value');
  },
};

async function kubeStore(clock: FakeClock): Promise<KubeEvidenceStore & EvidenceStore> {
  const api = await new FakeKubeApi().start();
  cleanups.push(() => api.close());
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(path, api.kubeconfig());
  return new KubeEvidenceStore({ kubeConfig: loadKubeConfig(path), clock, logger: new FakeLogger() });
}

describe('evidence records of refused requests for another node’s disk', () => {
  it.each([
    [
      'JSON-lines store',
      async (clock: FakeClock) => ({
        store: await JsonlEvidenceStore.open({ dir: tmp(), clock, logger: new FakeLogger() }),
        idle: async () => {},
      }),
    ],
    [
      'Kubernetes store',
      async (clock: FakeClock) => {
        const store = await kubeStore(clock);
        return { store, idle: () => store.idle() };
      },
    ],
  ])(
    '%s: the victim’s issued record and its node name survive a refused join and rejoin for its disk; the dry run still warns',
    async (_name, open) => {
      const clock = new FakeClock();
      const { store, idle } = await open(clock);
      const h = guard(store, clock);
      expect((await h.issueJoinTicket(joinRequest(), caller(VICTIM_PEER, 1))).issued).toBe(true);
      await idle();
      await clock.advance(1000);
      expect((await h.issueJoinTicket(joinRequest(), caller('10.0.0.66:1', 2))).issued).toBe(false);
      await idle();
      await clock.advance(1000);
      expect((await h.issueRejoinTicket({ diskUuid: VICTIM_DISK }, caller('10.0.0.66:2', 2))).issued).toBe(
        false,
      );
      await idle();

      const records = await store.list();
      const victim = records.find((r) => r.outcome === 'issued');
      expect(victim).toMatchObject({ nodeName: 'worker-victim', peer: VICTIM_PEER, rpc: 'IssueJoinTicket' });
      // The refused rejoin named no node: it does not carry the victim's name.
      const refused = records.filter((r) => r.outcome === 'refused');
      expect(refused.map((r) => [r.rpc, r.nodeName, r.peer])).toEqual([
        ['IssueRejoinTicket', undefined, '10.0.0.66:2'],
      ]);

      const report = await dryRun(records, () => strictValidator);
      expect(report.wouldRefuseJoined).toEqual([victim?.key]);
      expect(report.nodes.find((n) => n.key === victim?.key)).toMatchObject({
        nodeName: 'worker-victim',
        joined: true,
        predicted: 'refused',
      });
    },
  );
});

describe('evidence records name the matched measurement set and the receipt', () => {
  it.each([
    [
      'JSON-lines store',
      async (clock: FakeClock) => ({
        store: await JsonlEvidenceStore.open({ dir: tmp(), clock, logger: new FakeLogger() }),
        idle: async () => {},
      }),
    ],
    [
      'Kubernetes store',
      async (clock: FakeClock) => {
        const store = await kubeStore(clock);
        return { store, idle: () => store.idle() };
      },
    ],
  ])(
    '%s: an issued record keeps the set, the receipt kid and its status; a refused one no receipt',
    async (_name, open) => {
      const clock = new FakeClock();
      const { store, idle } = await open(clock);
      const base = guard(store, clock) as unknown as { deps: Record<string, unknown> };
      const h = new GuardedJoinCall({
        ...(base.deps as unknown as ConstructorParameters<typeof GuardedJoinCall>[0]),
        receipts: { signer: { keyId: 'kid-1', sign: async () => 'a.b.c' }, clock, build: 'test' },
      });
      const withSet = (peer: string, document: number): JoinCaller => {
        const c = caller(peer, document);
        return { ...c, attestation: { ...c.attestation!, measurementSet: 'image-a' } };
      };
      expect((await h.issueJoinTicket(joinRequest(), withSet(VICTIM_PEER, 1))).issued).toBe(true);
      expect((await h.issueJoinTicket(joinRequest(), withSet('10.0.0.66:1', 2))).issued).toBe(false);
      await idle();
      const records = await store.list();
      expect(records.find((r) => r.outcome === 'issued')).toMatchObject({
        measurementSet: 'image-a',
        receiptKid: 'kid-1',
        receiptStatus: 'affirming',
      });
      const refused = records.find((r) => r.outcome === 'refused');
      expect(refused?.measurementSet).toBe('image-a');
      expect(refused?.receiptKid).toBeUndefined();
    },
  );
});
