/**
 * The join service's production wiring, the parts that need no cluster: the measurement salt file
 * (present and non-empty, or the service does not start), the API server endpoint from metadata
 * (`<VPC IP>:6443`, IPv6 in brackets, a metadata server without the IP yet is `unavailable`), and the
 * validator builder's refusal of variants the join service does not serve. The whole wiring runs in
 * cli.test.ts against the simulated API server.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  apiServerEndpointFromMetadata,
  METADATA_SELF_TIMEOUT_MS,
  readMeasurementSalt,
  validatorBuilder,
} from '../../../src/app/join-service/production.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { MetadataAPI } from '../../../src/ports/metadata-api.js';
import type { Variant } from '../../../src/ports/variant.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-join-production-');

describe('readMeasurementSalt', () => {
  it('reads the salt file', async () => {
    const path = join(tmp(), 'salt');
    writeFileSync(path, Buffer.alloc(32, 7));
    expect(await readMeasurementSalt(path)).toEqual(new Uint8Array(32).fill(7));
  });

  it.each([
    ['missing', (dir: string) => join(dir, 'missing'), /^reading measurement salt .*missing: /],
    [
      'empty',
      (dir: string) => {
        writeFileSync(join(dir, 'empty'), '');
        return join(dir, 'empty');
      },
      /^measurement salt file .*empty is empty$/,
    ],
  ])('a %s salt file is failed-precondition', async (_name, make, message) => {
    const err = await readMeasurementSalt(make(tmp())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfbootError);
    expect(err).toMatchObject({ code: 'failed-precondition', message: expect.stringMatching(message) });
  });
});

describe('apiServerEndpointFromMetadata', () => {
  function metadata(self: () => Promise<{ vpcIp: string }>) {
    const asked: Array<{ timeoutInMs?: number; signal?: AbortSignal } | undefined> = [];
    const api = {
      self: (options?: { timeoutInMs?: number; signal?: AbortSignal }) => {
        asked.push(options);
        return self();
      },
    } as unknown as Pick<MetadataAPI, 'self'>;
    return { api, asked };
  }

  it.each([
    ['10.0.0.4', '10.0.0.4:6443'],
    ['fd00::4', '[fd00::4]:6443'],
  ])('%s gives %s, asked within the bound and with the signal', async (vpcIp, endpoint) => {
    const { api, asked } = metadata(async () => ({ vpcIp }));
    const signal = new AbortController().signal;
    expect(await apiServerEndpointFromMetadata(api, signal)).toBe(endpoint);
    expect(asked).toEqual([{ timeoutInMs: METADATA_SELF_TIMEOUT_MS, signal }]);
  });

  it('metadata without a VPC IP yet is unavailable (retry later)', async () => {
    const { api } = metadata(async () => ({ vpcIp: '' }));
    await expect(apiServerEndpointFromMetadata(api)).rejects.toMatchObject({
      code: 'unavailable',
      message: "getting this node's VPC IP from metadata: metadata has no VPC IP yet",
    });
  });

  it('a failing metadata server is named with the step and keeps its kind', async () => {
    const { api } = metadata(() =>
      Promise.reject(new ConfbootError('deadline-exceeded', 'no answer in 30 s')),
    );
    await expect(apiServerEndpointFromMetadata(api)).rejects.toMatchObject({
      code: 'deadline-exceeded',
      message: "getting this node's VPC IP from metadata: no answer in 30 s",
    });
  });
});

describe('validatorBuilder', () => {
  it('refuses a variant the join service does not serve, naming the ones it does', () => {
    const build = () => validatorBuilder('no-such-variant' as Variant, {}, new FakeClock(), new FakeLogger());
    expect(build).toThrow(ConfbootError);
    expect(build).toThrow(
      /attestation variant no-such-variant is not supported by the join service \(supported: .*qemu-vtpm/,
    );
  });
});
