/** Importing the GCP provider loads no Google Cloud SDK: the Compute client loads only when first used. */
import { describe, expect, it } from 'vitest';
import * as gcp from '../../../../src/adapters/cloud/gcp/index.js';
import { gceInstanceInfo } from '../../../../src/adapters/cloud/gcp/instance-info.js';
import { GcpMetadataAPI, regionOfZone } from '../../../../src/adapters/cloud/gcp/metadata-api.js';
import { fromPackage, importInChild } from '../shared/import-in-child.js';

describe('the GCP provider index', () => {
  it('exports the metadata API and the instance info of their modules', () => {
    expect(gcp.GcpMetadataAPI).toBe(GcpMetadataAPI);
    expect(gcp.gceInstanceInfo).toBe(gceInstanceInfo);
    expect(gcp.regionOfZone).toBe(regionOfZone);
  });

  it('loads its modules but no @google-cloud package when imported', async () => {
    const { exports, urls } = await importInChild('src/adapters/cloud/gcp/index.ts');
    expect(exports).toEqual([
      'DEFAULT_GCE_METADATA_URL',
      'GcpMetadataAPI',
      'computeEndpointOptions',
      'fetchCapableAuthClient',
      'gceInstanceInfo',
      'regionOfZone',
    ]);
    expect(urls.some((u) => u.endsWith('/src/adapters/cloud/gcp/metadata-api.ts'))).toBe(true);
    expect(fromPackage(urls, '@google-cloud')).toEqual([]);
  }, 60_000);
});
