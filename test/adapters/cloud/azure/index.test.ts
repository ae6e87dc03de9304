/** Importing the Azure provider loads no Azure SDK: the ARM clients load only when ARM is first called. */
import { describe, expect, it } from 'vitest';
import { ImdsManagedIdentityCredential } from '../../../../src/adapters/cloud/azure/imds.js';
import * as azure from '../../../../src/adapters/cloud/azure/index.js';
import { AzureMetadataAPI, parseScaleSetVmId } from '../../../../src/adapters/cloud/azure/metadata-api.js';
import { fromPackage, importInChild } from '../shared/import-in-child.js';

describe('the Azure provider index', () => {
  it('exports the metadata API and the IMDS credential of their modules', () => {
    expect(azure.AzureMetadataAPI).toBe(AzureMetadataAPI);
    expect(azure.parseScaleSetVmId).toBe(parseScaleSetVmId);
    expect(azure.ImdsManagedIdentityCredential).toBe(ImdsManagedIdentityCredential);
  });

  it('loads its modules but no @azure package when imported', async () => {
    const { exports, urls } = await importInChild('src/adapters/cloud/azure/index.ts');
    expect(exports).toEqual([
      'AzureMetadataAPI',
      'DEFAULT_ARM_ENDPOINT',
      'DEFAULT_AZURE_IMDS_URL',
      'ImdsManagedIdentityCredential',
      'fetchImdsCompute',
      'parseScaleSetVmId',
    ]);
    expect(urls.some((u) => u.endsWith('/src/adapters/cloud/azure/metadata-api.ts'))).toBe(true);
    expect(fromPackage(urls, '@azure')).toEqual([]);
  }, 60_000);
});
