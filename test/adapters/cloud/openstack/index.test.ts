/** The OpenStack provider speaks plain HTTP: importing it loads no cloud SDK at all. */
import { describe, expect, it } from 'vitest';
import * as openstack from '../../../../src/adapters/cloud/openstack/index.js';
import {
  OpenStackMetadataAPI,
  parseCustomEndpoint,
} from '../../../../src/adapters/cloud/openstack/metadata-api.js';
import { fromPackage, importInChild } from '../shared/import-in-child.js';

describe('the OpenStack provider index', () => {
  it('exports the metadata API of its module', () => {
    expect(openstack.OpenStackMetadataAPI).toBe(OpenStackMetadataAPI);
    expect(openstack.parseCustomEndpoint).toBe(parseCustomEndpoint);
  });

  it('loads its module and no cloud SDK when imported', async () => {
    const { exports, urls } = await importInChild('src/adapters/cloud/openstack/index.ts');
    expect(exports).toEqual([
      'DEFAULT_CUSTOM_ENDPOINT_KEY',
      'DEFAULT_OPENSTACK_METADATA_URL',
      'OpenStackMetadataAPI',
      'parseCustomEndpoint',
    ]);
    expect(urls.some((u) => u.endsWith('/src/adapters/cloud/openstack/metadata-api.ts'))).toBe(true);
    for (const scope of ['@aws-sdk', '@azure', '@google-cloud']) expect(fromPackage(urls, scope)).toEqual([]);
  }, 60_000);
});
