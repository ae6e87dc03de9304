/**
 * Mutual-TLS material for the link from the join service to the key service (adapter): a fresh
 * per-cluster CA, a server certificate for the key service's cluster names and a client
 * certificate for the join service, all ECDSA P-256. The CA's private key is used to sign the two
 * certificates and then dropped, so nothing else can ever be issued under it; renewing means new
 * material for both sides.
 *
 * {@link renderKeyServiceTlsSecrets} wraps them in the two Secrets the manifests mount.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import type { V1Secret } from '@kubernetes/client-node';
import { Document } from 'yaml';
import { loadX509 } from './x509-loader.js';

/** Secret mounted by the key service: its certificate and key, and the CA of its clients. */
export const KEY_SERVICE_TLS_SECRET = 'key-service-tls';
/** Secret mounted by the join service: its client certificate and key, and the key service's CA. */
export const JOIN_SERVICE_CLIENT_TLS_SECRET = 'join-service-key-service-tls';
/** Default validity of the certificates. */
export const DEFAULT_TLS_VALIDITY_DAYS = 825;

/** Names the key service is reached by inside the cluster (namespace kube-system). */
export function keyServiceDnsNames(namespace: string): string[] {
  const svc = `key-service.${namespace}`;
  return ['key-service', svc, `${svc}.svc`, `${svc}.svc.cluster.local`];
}

/** PEM certificate and PKCS#8 PEM private key. */
export interface PemPair {
  certPem: string;
  keyPem: string;
}

/** The material {@link createKeyServiceTls} makes. */
export interface KeyServiceTls {
  /** The CA certificate both sides trust (its key is gone). */
  caPem: string;
  server: PemPair;
  client: PemPair;
}

/** Options of {@link createKeyServiceTls}. */
export interface KeyServiceTlsOptions {
  /** DNS names (or IP addresses) of the server certificate, e.g. {@link keyServiceDnsNames}. */
  serverNames: string[];
  /** Validity from now; default {@link DEFAULT_TLS_VALIDITY_DAYS}. */
  validityDays?: number;
  /** Default: the system time. */
  now?: Date;
}

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

function serial(): string {
  const s = randomBytes(16);
  s[0] = (s[0] ?? 0) & 0x7f || 0x01;
  return s.toString('hex');
}

async function pkcs8Pem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key)).toString('base64');
  return `-----BEGIN PRIVATE KEY-----\n${der.replace(/.{1,64}/g, '$&\n')}-----END PRIVATE KEY-----\n`;
}

/** Makes a fresh CA, signs a key-service server and a join-service client certificate, drops the CA key. */
export async function createKeyServiceTls(options: KeyServiceTlsOptions): Promise<KeyServiceTls> {
  if (options.serverNames.length === 0) throw new Error('key service TLS: no server name');
  const days = options.validityDays ?? DEFAULT_TLS_VALIDITY_DAYS;
  if (!Number.isInteger(days) || days < 1) throw new Error(`key service TLS: validity ${days} days`);
  const x509 = await loadX509();
  const now = (options.now ?? new Date()).getTime();
  // A little slack for clocks that lag the one that issued the certificates.
  const notBefore = new Date(now - 60 * 60 * 1000);
  const notAfter = new Date(now + days * 24 * 60 * 60 * 1000);
  const gen = () =>
    webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']) as Promise<webcrypto.CryptoKeyPair>;

  const caKeys = await gen();
  const caName = 'CN=confboot key-service CA';
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: caName,
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  const leaf = async (cn: string, eku: string, names: string[] | undefined): Promise<PemPair> => {
    const keys = await gen();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${cn}`,
      issuer: ca.subject,
      notBefore,
      notAfter,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: SIGN,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([eku], false),
        await x509.AuthorityKeyIdentifierExtension.create(ca, false),
        ...(names
          ? [
              new x509.SubjectAlternativeNameExtension(
                names.map((value) => ({ type: isIP(value) ? ('ip' as const) : ('dns' as const), value })),
              ),
            ]
          : []),
      ],
    });
    return { certPem: cert.toString('pem'), keyPem: await pkcs8Pem(keys.privateKey) };
  };
  return {
    caPem: ca.toString('pem'),
    server: await leaf('key-service', SERVER_AUTH, options.serverNames),
    client: await leaf('join-service', CLIENT_AUTH, undefined),
  };
}

/** The two TLS Secrets for `namespace` as multi-document YAML (holds private keys: apply, do not commit). */
export function renderKeyServiceTlsSecrets(tls: KeyServiceTls, namespace: string): string {
  return keyServiceTlsSecrets(tls, namespace)
    .map(([comment, object]) => {
      const doc = new Document(object);
      doc.commentBefore = comment;
      return doc.toString({ lineWidth: 0 });
    })
    .join('---\n');
}

/** The two Secrets of {@link renderKeyServiceTlsSecrets} as objects, each with its comment. */
export function keyServiceTlsSecrets(tls: KeyServiceTls, namespace: string): Array<[string, V1Secret]> {
  const secret = (name: string, pair: PemPair): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace,
      labels: { 'app.kubernetes.io/part-of': 'confboot' },
    },
    type: 'kubernetes.io/tls',
    stringData: { 'tls.crt': pair.certPem, 'tls.key': pair.keyPem, 'ca.crt': tls.caPem },
  });
  const docs: Array<[string, V1Secret]> = [
    [
      ' The key service: its server certificate and key, and the CA its clients must chain to.',
      secret(KEY_SERVICE_TLS_SECRET, tls.server),
    ],
    [
      " The join service: its client certificate and key, and the CA of the key service's certificate.",
      secret(JOIN_SERVICE_CLIENT_TLS_SECRET, tls.client),
    ],
  ];
  return docs;
}
