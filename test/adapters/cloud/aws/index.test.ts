/** Importing the AWS provider loads no AWS SDK client: they load only when AWS is first called. */
import { describe, expect, it } from 'vitest';
import * as aws from '../../../../src/adapters/cloud/aws/index.js';
import { awsInstanceIdentity } from '../../../../src/adapters/cloud/aws/instance-identity.js';
import { AwsMetadataAPI } from '../../../../src/adapters/cloud/aws/metadata-api.js';
import { fromPackage, importInChild } from '../shared/import-in-child.js';

describe('the AWS provider index', () => {
  it('exports the metadata API and the instance identity of their modules', () => {
    expect(aws.AwsMetadataAPI).toBe(AwsMetadataAPI);
    expect(aws.awsInstanceIdentity).toBe(awsInstanceIdentity);
    expect(aws.DEFAULT_AWS_IMDS_URL).toMatch(/^http:\/\//);
  });

  it('loads its modules but no @aws-sdk package when imported', async () => {
    const { exports, urls } = await importInChild('src/adapters/cloud/aws/index.ts');
    expect(exports).toEqual(['AwsMetadataAPI', 'DEFAULT_AWS_IMDS_URL', 'awsInstanceIdentity']);
    expect(urls.some((u) => u.endsWith('/src/adapters/cloud/aws/metadata-api.ts'))).toBe(true);
    expect(fromPackage(urls, '@aws-sdk')).toEqual([]);
  }, 60_000);
});
