/**
 * The instance info an EC2 node's vTPM attestation (aws-nitro-tpm) carries: the IMDSv2 instance
 * identity document.
 */
import { wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest } from '../../http/request.js';

/**
 * Reads the IMDSv2 instance identity document (a session token first, then the document), the
 * instance info of aws-nitro-tpm.
 */
export async function awsInstanceIdentity(baseUrl: string, options?: CallOptions): Promise<Uint8Array> {
  const root = baseUrl.replace(/\/+$/, '');
  const signal = options?.signal ? { signal: options.signal } : {};
  try {
    const tokenRes = await httpRequest({
      url: `${root}/latest/api/token`,
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60' },
      ...signal,
    });
    const token = expectOk(tokenRes, 'IMDSv2 session token').body.toString('utf8').trim();
    const doc = await httpRequest({
      url: `${root}/latest/dynamic/instance-identity/document`,
      headers: { 'X-aws-ec2-metadata-token': token },
      ...signal,
    });
    return new Uint8Array(expectOk(doc, 'IMDS instance identity document').body);
  } catch (err) {
    throw wrapError('reading AWS instance identity document', err, 'unavailable');
  }
}
