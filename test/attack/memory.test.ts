/**
 * Attack family: memory exhaustion by an attested node. worker-0 (real swtpm, good boot, the
 * cluster's own instance) sends 10 concurrent join requests whose kubelet CSR is junk — 3.9 MB (under
 * grpc-js's default 4 MiB message limit: the original finding), exactly the per-field limit
 * (16 KiB, the largest a request may carry), and one byte over it — each on its own attested
 * connection with its own TPM quote. The join service runs in a CHILD process from the built code
 * (support/memory-target.child.mjs, `npm run build` first) with its default memory budget, so the
 * kernel's high-water mark of that process (resourceUsage().maxRSS) is the service's own peak RSS.
 * Asserted: every junk request is refused with the exact status and audit reason, nothing is
 * issued to it, an honest join still succeeds afterwards, and the peak RSS stays below the budget.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOIN_SERVICE_MEMORY_BUDGET_MIB } from '../../src/app/defaults.js';
import { REQUEST_FIELD_LIMITS } from '../../src/domain/ticket-request.js';
import { attempt, joinRequest } from './support/attack.js';
import { type SwtpmNode, startSwtpmNode } from './support/nodes.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CHILD = join(import.meta.dirname, 'support/memory-target.child.mjs');
const BUILT = join(ROOT, 'dist/src/app/join-service/memory.js');

interface Usage {
  maxRssKiB: number;
  rssBytes: number;
  audits: Array<{ rpc: string; outcome: string; code?: string; reason: string }>;
}

let child: ChildProcess;
let endpoint: string;
let node: SwtpmNode;

function next<T>(what: string): Promise<T> {
  return new Promise<T>((ok, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`no ${what} from the join service child within 60 s`)),
      60_000,
    );
    child.once('message', (m) => {
      clearTimeout(timer);
      ok(m as T);
    });
  });
}

async function usage(): Promise<Usage> {
  const reply = next<Usage>('usage report');
  child.send('usage');
  return reply;
}

beforeAll(async () => {
  if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run npm run build first`);
  child = fork(CHILD, [], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
  const [ready, swtpm] = await Promise.all([next<{ endpoint: string }>('ready message'), startSwtpmNode()]);
  endpoint = ready.endpoint;
  node = swtpm;
}, 120_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.send('stop');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  await node?.stop();
});

/** 10 concurrent join attempts from worker-0 whose CSR is `csrBytes` of random junk. */
async function junkRound(csrBytes: number) {
  const honest = await joinRequest('worker-0');
  return Promise.all(
    Array.from({ length: 10 }, () =>
      attempt(endpoint, node.issuer, {
        request: { ...honest, certificateRequest: new Uint8Array(randomBytes(csrBytes)) },
      }),
    ),
  );
}

describe('an attested node sending 10 concurrent maximum-size junk requests (service in a child process)', () => {
  it('is refused request by request, and the service peak RSS stays inside its memory budget', async () => {
    // Warm-up: an honest join loads everything a ticket needs (validator, CA, key service client).
    const warm = await attempt(endpoint, node.issuer);
    expect(warm.code, warm.details).toBe(status.OK);
    const before = await usage();
    expect(before.audits.map((a) => a.outcome)).toEqual(['issued']);

    // 3.9 MB CSRs: over the gRPC receive limit derived from the field limits; grpc-js refuses each
    // message before decoding it, so no handler runs (no audit event).
    const huge = await junkRound(3_900_000);
    for (const o of huge) {
      expect(o.code, o.details).toBe(status.RESOURCE_EXHAUSTED);
      expect(o.details).toMatch(/larger than max/i);
    }
    // Exactly the CSR field limit: decoded, then refused as a CSR that does not parse.
    const max = await junkRound(REQUEST_FIELD_LIMITS.certificateRequestBytes);
    for (const o of max) expect(o.code, o.details).toBe(status.INVALID_ARGUMENT);
    // One byte over the field limit: refused on its size, before any parsing.
    const over = await junkRound(REQUEST_FIELD_LIMITS.certificateRequestBytes + 1);
    for (const o of over) {
      expect(o.code, o.details).toBe(status.INVALID_ARGUMENT);
      expect(o.details).toContain(
        `certificate signing request has ${REQUEST_FIELD_LIMITS.certificateRequestBytes + 1} bytes, more than the limit of ${REQUEST_FIELD_LIMITS.certificateRequestBytes}`,
      );
    }

    const after = await attempt(endpoint, node.issuer);
    expect(after.code, after.details).toBe(status.OK);
    const end = await usage();
    const reasons = end.audits.map((a) => `${a.outcome}:${a.reason}`);
    expect(reasons.filter((r) => r === 'refused:malformed-request')).toHaveLength(10);
    expect(reasons.filter((r) => r === 'refused:request-too-large')).toHaveLength(10);
    expect(reasons.filter((r) => r.startsWith('issued'))).toHaveLength(1);
    expect(reasons).toHaveLength(21);

    const peakMib = end.maxRssKiB / 1024;
    console.log(
      `join service peak RSS ${peakMib.toFixed(1)} MiB (after warm-up ${(before.maxRssKiB / 1024).toFixed(1)} MiB, now ${(end.rssBytes / 1048576).toFixed(1)} MiB), budget ${JOIN_SERVICE_MEMORY_BUDGET_MIB} MiB`,
    );
    expect(peakMib).toBeLessThan(JOIN_SERVICE_MEMORY_BUDGET_MIB);
  }, 240_000);
});
