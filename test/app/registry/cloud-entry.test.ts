/**
 * One cloud registry entry, built by `cloud()` around a stand-in adapter (the FakeMetadataAPI):
 * nothing is loaded before the first metadata call, the adapter is built once from the node's
 * settings, a failed build is not cached; the provider settings give the API endpoint only when
 * configured and read the cloud API token from its file on every call (missing or empty file
 * refused as unavailable); definedOnly drops undefined options.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import {
  cloud,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  definedOnly,
  type ProviderSettings,
  providerSettings,
} from '../../../src/app/registry/cloud-entry.js';
import type { MetadataWorld } from '../../contract/metadata-api.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';
import { useTmpDirs } from '../../support/tmp.js';

const WORLD: MetadataWorld = {
  self: { name: 'cp-0', role: 'ControlPlane', vpcIp: '127.0.0.1' },
  peers: [],
  foreign: [],
  uid: 'uid-1',
};
const tmp = useTmpDirs();

describe('cloud()', () => {
  it('loads and builds the adapter on the first call only, from the node settings', async () => {
    const events: string[] = [];
    const seen: ProviderSettings[] = [];
    const entry = cloud(
      async () => {
        events.push('load');
        return { FakeMetadataAPI };
      },
      (m, settings) => {
        events.push('create');
        seen.push(settings);
        return new m.FakeMetadataAPI(WORLD);
      },
      { sdkPackages: ['yaml'], variants: ['qemu-vtpm'], entrypoint: true },
    );
    expect([entry.sdkPackages, entry.variants, entry.entrypoint]).toEqual([['yaml'], ['qemu-vtpm'], true]);
    const api = entry.metadataApi(
      { csp: 'example', metadata: { baseUrl: 'http://127.0.0.1:9' } },
      silentLogger,
    );
    expect(events).toEqual([]);
    expect((await api.self()).name).toBe('cp-0');
    expect(await api.uid()).toBe('uid-1');
    expect(events).toEqual(['load', 'create']);
    expect([seen[0]?.csp, seen[0]?.metadataUrl]).toEqual(['example', 'http://127.0.0.1:9']);
    await entry.preload();
    expect(events).toEqual(['load', 'create', 'load']);
  });

  it('does not cache a failed build: the next call tries again', async () => {
    let attempts = 0;
    const entry = cloud(
      async () => ({}),
      () => {
        attempts++;
        if (attempts === 1) throw new Error('no region configured');
        return new FakeMetadataAPI(WORLD);
      },
    );
    const api = entry.metadataApi({ csp: 'example', metadata: {} }, silentLogger);
    await expect(api.list()).rejects.toThrow(
      expect.objectContaining({
        code: 'failed-precondition',
        message: 'setting up the example metadata API: no region configured',
      }),
    );
    expect((await api.list()).map((i) => i.name)).toEqual(['cp-0']);
    expect(attempts).toBe(2);
  });
});

describe('providerSettings', () => {
  it('gives the API endpoint only when configured', () => {
    expect(
      providerSettings(
        { csp: 'openstack', metadata: { apiEndpoint: 'http://nova' } },
        silentLogger,
      ).apiEndpoint(),
    ).toBe('http://nova');
    // As the manifests give it: a ConfigMap file's content, ending in a newline.
    expect(
      providerSettings(
        { csp: 'openstack', metadata: { apiEndpoint: 'https://nova:8774/v2.1\n' } },
        silentLogger,
      ).apiEndpoint(),
    ).toBe('https://nova:8774/v2.1');
    expect(
      providerSettings({ csp: 'openstack', metadata: { apiEndpoint: '\n' } }, silentLogger).apiEndpointIfSet,
    ).toBeUndefined();
    const unset = providerSettings({ csp: 'openstack', metadata: { apiEndpoint: '' } }, silentLogger);
    expect(unset.apiEndpointIfSet).toBeUndefined();
    expect(() => unset.apiEndpoint()).toThrow(
      'openstack metadata: no cloud API endpoint configured (node config metadata.apiEndpoint, flag --cloud-api-endpoint)',
    );
  });

  it('reads the cloud API token from its file on every call, trimmed', async () => {
    const file = join(tmp(), 'token');
    writeFileSync(file, ' tok-1\n');
    const s = providerSettings({ csp: 'openstack', metadata: { authTokenFile: file } }, silentLogger);
    expect(await s.authToken()).toBe('tok-1');
    writeFileSync(file, 'tok-2');
    expect(await s.authToken()).toBe('tok-2');
    writeFileSync(file, '  \n');
    await expect(s.authToken()).rejects.toThrow(
      expect.objectContaining({
        code: 'unavailable',
        message: `openstack metadata: cloud API token file ${file} is empty`,
      }),
    );
  });

  it('refuses a missing token file as unavailable, naming the default path when none is set', async () => {
    const s = providerSettings({ csp: 'openstack', metadata: {} }, silentLogger);
    await expect(s.authToken()).rejects.toThrow(
      expect.objectContaining({
        code: 'unavailable',
        message: expect.stringContaining(`reading the cloud API token from ${DEFAULT_CLOUD_API_TOKEN_PATH}`),
      }),
    );
  });
});

describe('definedOnly', () => {
  it('drops undefined values and keeps the rest, falsy ones too', () => {
    expect(definedOnly({ a: 1, b: undefined, c: '', d: 0, e: null, f: false })).toEqual({
      a: 1,
      c: '',
      d: 0,
      e: null,
      f: false,
    });
  });
});
