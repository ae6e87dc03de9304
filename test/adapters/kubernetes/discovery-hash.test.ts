/**
 * kubeadm's discovery pin (`--discovery-token-ca-cert-hash`) of REAL CA certificates from
 * ../shared/testvectors, checked against kubeadm's documented recipe run with the real openssl
 * (`openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256`), from the PEM and from a
 * kubeconfig; kubeconfigs and PEM texts without a usable CA are refused as failed-precondition
 * naming what is missing.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  discoveryHashFromCaCert,
  discoveryHashFromKubeconfig,
} from '../../../src/adapters/kubernetes/discovery-hash.js';
import { VECTORS } from '../attestation/snp/vectors.js';

const ANCHORS = resolve(VECTORS, 'constellation/trust-anchors');
const ARK = readFileSync(resolve(ANCHORS, 'amd-ark-milan.pem'), 'utf8');
const INTEL = readFileSync(resolve(ANCHORS, 'intel-sgx-root-ca.pem'), 'utf8');

/** kubeadm's documented way to compute the pin, with openssl. */
function opensslPin(pem: string): string {
  const pub = execFileSync('openssl', ['x509', '-pubkey', '-noout'], { input: pem });
  const der = execFileSync('openssl', ['pkey', '-pubin', '-outform', 'der'], { input: pub });
  return `sha256:${createHash('sha256').update(der).digest('hex')}`;
}

function kubeconfig(caPem: string | undefined, current = 'admin@c', clusterOfContext = 'c'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': current,
    contexts: [{ name: 'admin@c', context: { cluster: clusterOfContext, user: 'admin' } }],
    clusters: [
      {
        name: 'c',
        cluster: {
          server: 'https://10.0.0.1:6443',
          ...(caPem === undefined
            ? {}
            : { 'certificate-authority-data': Buffer.from(caPem).toString('base64') }),
        },
      },
    ],
  });
}

describe('discoveryHashFromCaCert', () => {
  it.each([
    ['AMD ARK (RSA-4096)', ARK],
    ['Intel SGX root (P-256)', INTEL],
  ])('pins the %s as kubeadm does', (_n, pem) => {
    expect(discoveryHashFromCaCert(pem)).toBe(opensslPin(pem));
  });

  it('pins the first certificate of a bundle', () => {
    expect(discoveryHashFromCaCert(`${INTEL}\n${ARK}`)).toBe(opensslPin(INTEL));
  });

  it.each([
    ['no PEM', 'hello', 'holds no PEM certificate'],
    [
      'a damaged body',
      '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----',
      'parsing the CA certificate: ',
    ],
  ])('refuses %s', (_n, pem, why) => {
    expect(() => discoveryHashFromCaCert(pem, '/etc/kubernetes/pki/ca.crt')).toThrow(
      expect.objectContaining({
        code: 'failed-precondition',
        message: expect.stringContaining(
          `computing discovery CA hash from /etc/kubernetes/pki/ca.crt: ${why}`,
        ),
      }),
    );
  });
});

describe('discoveryHashFromKubeconfig', () => {
  it("pins the current context's cluster CA", () => {
    expect(discoveryHashFromKubeconfig(kubeconfig(INTEL), 'admin.conf')).toBe(opensslPin(INTEL));
  });

  it.each([
    ['not YAML', ':\n  - [', 'not valid YAML'],
    ['a scalar', '42', 'not a kubeconfig'],
    ['no current context', kubeconfig(INTEL, ''), 'no current context'],
    ['an undefined current context', kubeconfig(INTEL, 'other'), 'current context "other" is not defined'],
    ['a context naming no cluster', kubeconfig(INTEL, 'admin@c', 'gone'), 'no cluster for context "admin@c"'],
    ['no CA data', kubeconfig(undefined), 'cluster "c" has no certificate-authority-data'],
  ])('refuses %s', (_n, text, why) => {
    expect(() => discoveryHashFromKubeconfig(text, 'admin.conf')).toThrow(
      expect.objectContaining({
        code: 'failed-precondition',
        message: expect.stringContaining(`computing discovery CA hash from admin.conf: ${why}`),
      }),
    );
  });

  it('names the cluster when its CA data is not a certificate', () => {
    expect(() => discoveryHashFromKubeconfig(kubeconfig('junk'))).toThrow(
      'computing discovery CA hash from kubeconfig, certificate-authority-data of cluster "c": holds no PEM certificate',
    );
  });
});
