/**
 * The cloud registry agrees with the files it names: every cloud with `entrypoint: true` has
 * src/app/entrypoints/<cloud>.ts fixing exactly that cloud, and no other entrypoint exists; every
 * cloud's adapter loads and builds a MetadataAPI.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import type { CloudEntry, LazyMetadataAPI } from '../../../src/app/registry/cloud-entry.js';
import { CLOUDS, cloudNames, cloudVariants } from '../../../src/app/registry/index.js';

const ENTRYPOINTS = resolve(import.meta.dirname, '../../../src/app/entrypoints');

describe('the cloud registry', () => {
  it('names exactly the entrypoint files there are, each fixing its own cloud', () => {
    const withEntrypoint = cloudNames().filter((c) => CLOUDS[c]?.entrypoint === true);
    const files = readdirSync(ENTRYPOINTS).filter((f) => f.endsWith('.ts'));
    expect(files.map((f) => f.replace(/\.ts$/, '')).sort()).toEqual([...withEntrypoint].sort());
    for (const cloud of withEntrypoint) {
      const code = readFileSync(join(ENTRYPOINTS, `${cloud}.ts`), 'utf8');
      expect(code).toContain(`runBootstrapper(argv, '${cloud}')`);
    }
  });

  it('gives every cloud at least one variant and an adapter that builds its MetadataAPI', async () => {
    for (const cloud of cloudNames()) {
      expect(cloudVariants(cloud).length, cloud).toBeGreaterThan(0);
      const entry = CLOUDS[cloud] as CloudEntry;
      await entry.preload();
      const metadata = entry.metadataApi(
        { csp: cloud, metadata: { apiEndpoint: 'http://127.0.0.1:9' } },
        silentLogger,
      );
      expect(await (metadata as LazyMetadataAPI).adapter(), cloud).toBeDefined();
    }
  });
});
