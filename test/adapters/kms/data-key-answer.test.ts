/** One data key request answered as the key service answers it: a key, or the gRPC status of a refusal. */
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { answerDataKeyRequest } from '../../../src/adapters/kms/data-key-answer.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { KMS } from '../../../src/ports/kms.js';
import { loadHkdfVectors } from '../../contract/kms.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

const kms = new HkdfKms(new Uint8Array(32).fill(0xaa), new Uint8Array(32).fill(0xbb));

describe('answerDataKeyRequest', () => {
  it('answers the upstream vectors, logging the request but never the key', async () => {
    for (const v of loadHkdfVectors()) {
      const log = new FakeLogger();
      const vkms = new HkdfKms(Buffer.from(v.secret, 'hex'), Buffer.from(v.salt, 'hex'));
      const answer = await answerDataKeyRequest(vkms, log, v.info.slice(4), v.length);
      expect('key' in answer && Buffer.from(answer.key).toString('hex')).toBe(v.expected);
      expect(log.events.map((e) => [e.level, e.msg])).toEqual([['debug', 'Derived data key']]);
      expect(log.text()).not.toContain(v.expected);
    }
  });

  it.each([
    ['length zero', 'disk', 0, "can't derive key with length zero"],
    ['an empty ID', '', 32, 'no data key ID specified'],
    ['a fractional length', 'disk', 1.5, /^can't derive key with length 1\.5/],
    ['an ID too long for HKDF info', 'x'.repeat(2000), 32, /^data key ID is too long/],
  ] as const)(
    'refuses %s with INVALID_ARGUMENT and upstream’s message, without asking the KMS',
    async (_n, id, length, details) => {
      const asked: string[] = [];
      const spy: KMS = {
        getDataKey: async (i, l) => {
          asked.push(i);
          return kms.getDataKey(i, l);
        },
      };
      const log = new FakeLogger();
      const answer = await answerDataKeyRequest(spy, log, id, length);
      expect('refusal' in answer && answer.refusal.code).toBe(status.INVALID_ARGUMENT);
      expect('refusal' in answer && answer.refusal.details).toMatch(details);
      expect(asked).toEqual([]);
      expect(log.events.map((e) => e.msg)).toEqual(['Refused data key request']);
    },
  );

  it("answers a KMS's confboot error through the status table, and anything else as INTERNAL naming the operation", async () => {
    const unavailable: KMS = {
      getDataKey: async () => {
        throw new ConfbootError('unavailable', 'vault sealed');
      },
    };
    expect(await answerDataKeyRequest(unavailable, new FakeLogger(), 'disk', 32)).toEqual({
      refusal: { code: status.UNAVAILABLE, details: 'vault sealed' },
    });
    const broken: KMS = {
      getDataKey: async () => {
        throw new TypeError('boom');
      },
    };
    const log = new FakeLogger();
    expect(await answerDataKeyRequest(broken, log, 'disk', 32)).toEqual({
      refusal: { code: status.INTERNAL, details: 'getting data key: boom' },
    });
    const internal: KMS = {
      getDataKey: async () => {
        throw new ConfbootError('internal', 'bug');
      },
    };
    expect(await answerDataKeyRequest(internal, new FakeLogger(), 'disk', 32)).toMatchObject({
      refusal: { code: status.INTERNAL },
    });
    expect(log.events.map((e) => [e.level, e.msg])).toEqual([['error', 'Deriving data key failed']]);
  });
});
