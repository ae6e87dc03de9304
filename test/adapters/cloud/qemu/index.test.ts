/** The QEMU provider (metadata client and server) loads no cloud SDK when imported. */
import { describe, expect, it } from 'vitest';
import * as qemu from '../../../../src/adapters/cloud/qemu/index.js';
import { parseLeases, readLeases } from '../../../../src/adapters/cloud/qemu/leases.js';
import { QemuMetadataAPI } from '../../../../src/adapters/cloud/qemu/metadata-api.js';
import { startMetadataServer } from '../../../../src/adapters/cloud/qemu/metadata-server.js';
import { fromPackage, importInChild } from '../shared/import-in-child.js';

describe('the QEMU provider index', () => {
  it('exports the client, the server and the lease parser of their modules', () => {
    expect(qemu.QemuMetadataAPI).toBe(QemuMetadataAPI);
    expect(qemu.startMetadataServer).toBe(startMetadataServer);
    expect(qemu.parseLeases).toBe(parseLeases);
    expect(qemu.readLeases).toBe(readLeases);
  });

  it('loads its modules and no cloud SDK when imported', async () => {
    const { exports, urls } = await importInChild('src/adapters/cloud/qemu/index.ts');
    expect(exports).toEqual([
      'DEFAULT_QEMU_METADATA_URL',
      'QemuMetadataAPI',
      'parseLeases',
      'readLeases',
      'startMetadataServer',
    ]);
    expect(urls.some((u) => u.endsWith('/src/adapters/cloud/qemu/metadata-server.ts'))).toBe(true);
    for (const scope of ['@aws-sdk', '@azure', '@google-cloud']) expect(fromPackage(urls, scope)).toEqual([]);
  }, 60_000);
});
