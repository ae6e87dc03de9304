/**
 * The node's verification service wiring: it starts only once the node is bootstrapped (joined,
 * initialised, or bootstrapped in an earlier boot), never after bootstrapping stopped or failed or
 * after stop(), and it answers over real HTTP on loopback with the issuer's document bound to the
 * caller's nonce and the fixed user data. The issuer is a stub recording its inputs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HttpAttestationFetcher } from '../../../src/adapters/http/verification-client.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import {
  type PendingVerificationService,
  serveWhenBootstrapped,
  startVerificationService,
} from '../../../src/app/verification-service/serve.js';
import type { BootstrapResult } from '../../../src/domain/bootstrapper.js';
import type { Logger } from '../../../src/ports/logger.js';

const lines: string[] = [];
const logger: Logger = {
  debug: () => {},
  info: (m: string) => lines.push(m),
  warn: () => {},
  error: (m: string) => lines.push(m),
  child: () => logger,
} as unknown as Logger;

const issuer = {
  variant: 'qemu-vtpm' as const,
  oid: '1.3.9900.5.1',
  async issue(userData: Uint8Array, nonce: Uint8Array) {
    return new TextEncoder().encode(
      `${Buffer.from(userData).toString()}|${Buffer.from(nonce).toString('hex')}`,
    );
  },
};
const deps = { issuer, clock: new SystemClock(), logger };
const settings = { listen: { host: '127.0.0.1', port: 0 } };

const pending: PendingVerificationService[] = [];
afterEach(async () => {
  for (const p of pending.splice(0)) await p.stop();
  lines.length = 0;
});

function watch(done: Promise<BootstrapResult>): PendingVerificationService {
  const p = serveWhenBootstrapped(done, deps, settings);
  pending.push(p);
  return p;
}

describe('the verification service of a bootstrapper', () => {
  it.each(['joined', 'initialized', 'already-bootstrapped'] as const)(
    'starts once the node is %s and answers a nonce with a document binding it',
    async (outcome) => {
      let finish!: (r: BootstrapResult) => void;
      const p = watch(new Promise((r) => (finish = r)));
      expect(lines).toEqual([]);
      finish({ outcome });
      const port = await p.listening;
      expect(port).toBeGreaterThan(0);
      const nonce = Buffer.alloc(32, 9);
      const got = await new HttpAttestationFetcher().fetch(`127.0.0.1:${port}`, nonce);
      expect(Buffer.from(got.document).toString()).toBe(`VerifyService|${nonce.toString('hex')}`);
    },
  );

  it('never starts when bootstrapping stopped or failed', async () => {
    expect(await watch(Promise.resolve({ outcome: 'stopped' })).listening).toBeUndefined();
    expect(await watch(Promise.reject(new Error('kubeadm failed'))).listening).toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('never starts when stopped before the node was bootstrapped', async () => {
    let finish!: (r: BootstrapResult) => void;
    const p = watch(new Promise((r) => (finish = r)));
    await p.stop();
    finish({ outcome: 'joined' });
    expect(await p.listening).toBeUndefined();
  });

  it('logs and gives up when its port is taken; the bootstrapper is not failed by it', async () => {
    const taken = await startVerificationService(deps, settings);
    try {
      const p = serveWhenBootstrapped(Promise.resolve({ outcome: 'joined' }), deps, {
        listen: { host: '127.0.0.1', port: taken.port },
      });
      expect(await p.listening).toBeUndefined();
      expect(lines).toContain('Verification service not started');
    } finally {
      await taken.close();
    }
  });
});
