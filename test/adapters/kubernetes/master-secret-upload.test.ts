/**
 * What the master secret upload takes from the admin kubeconfig before it sends the secret: an
 * https server, a CA certificate (REAL ones from the test vectors: Intel's SGX root is a CA, a GCE
 * AK certificate is not) and a bearer token of the current context; any kubeconfig that would send
 * the secret without verified TLS, or cannot be used, is refused with check `kubeconfig`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  apiAccessFromKubeconfig,
  MasterSecretUploadError,
} from '../../../src/adapters/kubernetes/master-secret-upload.js';
import { VECTORS } from '../attestation/snp/vectors.js';

const CA = readFileSync(resolve(VECTORS, 'constellation/trust-anchors/intel-sgx-root-ca.pem'), 'utf8');
const LEAF = readFileSync(resolve(VECTORS, 'go-tpm-tools/certificates/pca_tpm_ecc_sign_cert.pem'), 'utf8');

function kubeconfig(
  cluster: Record<string, unknown>,
  user: Record<string, unknown> = { token: 'admin-token' },
) {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'admin@c',
    contexts: [{ name: 'admin@c', context: { cluster: 'c', user: 'admin' } }],
    clusters: [{ name: 'c', cluster }],
    users: [{ name: 'admin', user }],
  });
}
const GOOD = {
  server: 'https://10.0.0.1:6443',
  'certificate-authority-data': Buffer.from(CA).toString('base64'),
};

describe('apiAccessFromKubeconfig', () => {
  it('takes server, CA and token of the current context, from text or bytes', () => {
    const access = apiAccessFromKubeconfig(Buffer.from(kubeconfig(GOOD)));
    expect([access.server.href, access.caPem, access.token]).toEqual([
      'https://10.0.0.1:6443/',
      CA,
      'admin-token',
    ]);
  });

  it.each([
    ['not YAML', ':\n  - [', 'is not YAML'],
    ['no current context', stringify({ clusters: [] }), 'has no current context with cluster and user'],
    [
      'TLS verification off',
      kubeconfig({ ...GOOD, 'insecure-skip-tls-verify': true }),
      'turns TLS verification off',
    ],
    [
      'a plain http server',
      kubeconfig({ ...GOOD, server: 'http://10.0.0.1:6443' }),
      'server is http:, not https:',
    ],
    ['no server URL', kubeconfig({ ...GOOD, server: 'not a url' }), 'has no valid server URL'],
    ['no CA data', kubeconfig({ server: GOOD.server }), 'carries no certificate-authority-data'],
    [
      'a certificate that is not a CA',
      kubeconfig({ ...GOOD, 'certificate-authority-data': Buffer.from(LEAF).toString('base64') }),
      'carries no CA certificate',
    ],
    [
      'no token (client certificates only)',
      kubeconfig(GOOD, { 'client-certificate-data': 'x' }),
      'carries no bearer token',
    ],
  ])('refuses %s', (_n, text, why) => {
    let err: unknown;
    try {
      apiAccessFromKubeconfig(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MasterSecretUploadError);
    expect([(err as MasterSecretUploadError).check, (err as Error).message]).toEqual([
      'kubeconfig',
      `the admin kubeconfig ${why}`,
    ]);
  });
});
