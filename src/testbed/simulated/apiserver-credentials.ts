/**
 * The SIMULATED API server's credentials in a mini control-plane VM, made by the simulated
 * `kubeadm init` like kubeadm makes a real API server's: a serving certificate
 * (`<pki>/apiserver.crt`, `apiserver.key`) signed by the cluster CA that init just created, for the
 * node's address, and an admin credential in admin.conf — here a random bearer token (32 bytes
 * from the VM's CSPRNG) as `users[].user.token`.
 *
 * Nothing outside the control-plane VM learns the token except through admin.conf: the
 * bootstrapper returns admin.conf to the operator inside the init response, over the attested TLS
 * connection whose server the operator verified, and the API server speaks only TLS with a
 * certificate the operator checks against the CA from that same admin.conf. No other VM on the
 * bridge sees the token or can stand in for the API server.
 */
import { createHash, randomBytes, webcrypto, X509Certificate } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { loadX509, type X509Module } from '../../adapters/pki/x509-loader.js';

/** The serving certificate and key kubeadm writes into the PKI directory. */
export const APISERVER_CERT = 'apiserver.crt';
export const APISERVER_KEY = 'apiserver.key';

/** What the simulated API server needs to serve: TLS material and the admin token. */
export interface ApiServerCredentials {
  certPem: string;
  keyPem: string;
  caPem: string;
  token: string;
}

const EC_GEN = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIG_EC = { name: 'ECDSA', hash: 'SHA-256' } as const;

function pemBody(pem: string, label: string): Buffer {
  const m = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]+)-----END ${label}-----`).exec(pem);
  if (!m?.[1]) throw new Error(`no ${label} PEM block`);
  return Buffer.from(m[1].replace(/\s+/g, ''), 'base64');
}

function pkcs8Pem(der: ArrayBuffer): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim();
  return `-----BEGIN PRIVATE KEY-----\n${b64}\n-----END PRIVATE KEY-----\n`;
}

/** Writes `data` to `path` through a fresh temporary file and a rename (mode 0600). */
async function replaceFile(path: string, data: string): Promise<void> {
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, data, { mode: 0o600, flag: 'wx' });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * A leaf certificate signed by the cluster CA in `pkiDir`, for `publicKeyPem` (SPKI, P-256) or
 * else for a new key, which it returns too.
 */
export async function issueFromClusterCa(
  pkiDir: string,
  now: Date,
  subject: string,
  extensions: (x509: X509Module) => InstanceType<X509Module['Extension']>[],
  publicKeyPem?: string,
): Promise<{ caPem: string; certPem: string; keyPem?: string }> {
  const caPem = await readFile(join(pkiDir, 'ca.crt'), 'utf8');
  const caKeyPem = await readFile(join(pkiDir, 'ca.key'), 'utf8');
  const x509 = await loadX509();
  const ca = new x509.X509Certificate(caPem);
  const caKey = await webcrypto.subtle.importKey('pkcs8', pemBody(caKeyPem, 'PRIVATE KEY'), EC_GEN, false, [
    'sign',
  ]);
  const keys =
    publicKeyPem === undefined
      ? ((await webcrypto.subtle.generateKey(EC_GEN, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair)
      : undefined;
  const publicKey =
    keys?.publicKey ??
    (await webcrypto.subtle.importKey('spki', pemBody(publicKeyPem as string, 'PUBLIC KEY'), EC_GEN, true, [
      'verify',
    ]));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: `01${randomBytes(15).toString('hex')}`,
    subject,
    issuer: ca.subject,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + 365 * 24 * 3600_000),
    publicKey,
    signingKey: caKey,
    signingAlgorithm: SIG_EC,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      ...extensions(x509),
      await x509.AuthorityKeyIdentifierExtension.create(ca),
    ],
  });
  return {
    caPem,
    certPem: cert.toString('pem'),
    ...(keys ? { keyPem: pkcs8Pem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) } : {}),
  };
}

/**
 * Issues the API server's serving certificate from the cluster CA in `pkiDir` (SANs: each of
 * `addresses`, 127.0.0.1 and the in-cluster DNS names) and writes a fresh random admin token into
 * `adminConfPath`'s users. Refuses to overwrite an existing serving key. With `publicKeyPem` (an
 * API server whose key lives elsewhere, as with an external CA's certificate request) the
 * certificate is for that key and no serving key is written.
 */
export async function issueApiServerCredentials(options: {
  pkiDir: string;
  adminConfPath: string;
  addresses: string[];
  publicKeyPem?: string;
  now?: Date;
}): Promise<void> {
  const { pkiDir, adminConfPath } = options;
  const ips = [...new Set([...options.addresses.filter((a) => isIP(a) !== 0), '127.0.0.1'])];
  const leaf = await issueFromClusterCa(
    pkiDir,
    options.now ?? new Date(),
    'CN=kube-apiserver',
    (x509) => [
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...ips.map((value) => ({ type: 'ip' as const, value })),
        ...['kubernetes', 'kubernetes.default', 'kubernetes.default.svc'].map((value) => ({
          type: 'dns' as const,
          value,
        })),
      ]),
    ],
    options.publicKeyPem,
  );
  if (leaf.keyPem !== undefined)
    await writeFile(join(pkiDir, APISERVER_KEY), leaf.keyPem, { mode: 0o600, flag: 'wx' });
  await writeFile(join(pkiDir, APISERVER_CERT), leaf.certPem, { mode: 0o644, flag: 'wx' });

  const config = parseYaml(await readFile(adminConfPath, 'utf8')) as {
    users?: Array<{ name: string; user: Record<string, unknown> }>;
  };
  if (!Array.isArray(config.users) || config.users.length !== 1)
    throw new Error(`${adminConfPath} does not hold exactly one user`);
  const token = randomBytes(32).toString('base64url');
  config.users = config.users.map((u) => ({ ...u, user: { token } }));
  await replaceFile(adminConfPath, stringifyYaml(config));
}

/**
 * What `kubeadm join --control-plane` leaves for the admin on a control plane that joined: an
 * admin.conf at `adminConfPath` (must not exist) for `server` (`https://HOST:PORT`, the control-plane
 * endpoint), trusting the cluster CA in `pkiDir` and authenticating with a fresh client certificate
 * signed by that CA for `kubernetes-admin` in the group `system:masters`. The CA key comes with the
 * control-plane files of the join ticket.
 */
export async function writeControlPlaneAdminConf(options: {
  pkiDir: string;
  adminConfPath: string;
  server: string;
  now?: Date;
}): Promise<void> {
  const leaf = await issueFromClusterCa(
    options.pkiDir,
    options.now ?? new Date(),
    'CN=kubernetes-admin, O=system:masters',
    (x509) => [new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth])],
  );
  const caPem = leaf.caPem;
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'kubernetes', cluster: { server: options.server, 'certificate-authority-data': b64(caPem) } },
    ],
    contexts: [
      { name: 'kubernetes-admin@kubernetes', context: { cluster: 'kubernetes', user: 'kubernetes-admin' } },
    ],
    'current-context': 'kubernetes-admin@kubernetes',
    users: [
      {
        name: 'kubernetes-admin',
        user: {
          'client-certificate-data': b64(leaf.certPem),
          'client-key-data': b64(leaf.keyPem as string),
        },
      },
    ],
  };
  await writeFile(options.adminConfPath, stringifyYaml(config), { mode: 0o600, flag: 'wx' });
}

/**
 * The credentials once {@link issueApiServerCredentials} has run (undefined before: a file is
 * missing or admin.conf carries no token yet). The serving certificate must chain to the CA in
 * `<pkiDir>/ca.crt`, and admin.conf must carry that CA.
 */
export async function loadApiServerCredentials(
  pkiDir: string,
  adminConfPath: string,
): Promise<ApiServerCredentials | undefined> {
  let certPem: string;
  let keyPem: string;
  let caPem: string;
  let adminConf: string;
  try {
    [certPem, keyPem, caPem, adminConf] = await Promise.all([
      readFile(join(pkiDir, APISERVER_CERT), 'utf8'),
      readFile(join(pkiDir, APISERVER_KEY), 'utf8'),
      readFile(join(pkiDir, 'ca.crt'), 'utf8'),
      readFile(adminConfPath, 'utf8'),
    ]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const config = parseYaml(adminConf) as {
    users?: Array<{ user?: { token?: unknown } }>;
    clusters?: Array<{ cluster?: Record<string, unknown> }>;
  };
  const token = config.users?.[0]?.user?.token;
  if (typeof token !== 'string' || token === '') return undefined;
  const caData = config.clusters?.[0]?.cluster?.['certificate-authority-data'];
  const ca = new X509Certificate(caPem);
  if (typeof caData !== 'string' || !new X509Certificate(Buffer.from(caData, 'base64')).raw.equals(ca.raw))
    throw new Error(`${adminConfPath} does not carry the cluster CA of ${pkiDir}`);
  if (!new X509Certificate(certPem).verify(ca.publicKey))
    throw new Error(`${APISERVER_CERT} is not signed by the cluster CA`);
  return { certPem, keyPem, caPem, token };
}

/** What an API server whose key lives elsewhere needs from the control plane: nothing secret. */
export interface PublicApiServerCredentials {
  /** The serving certificate {@link issueApiServerCredentials} issued for the external key. */
  certPem: string;
  caPem: string;
  /** SHA-256 (hex) of `Bearer <admin token>`: enough to check the token, useless to present it. */
  tokenSha256: string;
}

/**
 * The serving certificate, the cluster CA and a digest of the admin token, once
 * {@link issueApiServerCredentials} ran with `publicKeyPem` (undefined before).
 */
export async function loadPublicApiServerCredentials(
  pkiDir: string,
  adminConfPath: string,
): Promise<PublicApiServerCredentials | undefined> {
  let certPem: string;
  let caPem: string;
  let adminConf: string;
  try {
    [certPem, caPem, adminConf] = await Promise.all([
      readFile(join(pkiDir, APISERVER_CERT), 'utf8'),
      readFile(join(pkiDir, 'ca.crt'), 'utf8'),
      readFile(adminConfPath, 'utf8'),
    ]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const token = (parseYaml(adminConf) as { users?: Array<{ user?: { token?: unknown } }> }).users?.[0]?.user
    ?.token;
  if (typeof token !== 'string' || token === '') return undefined;
  if (!new X509Certificate(certPem).verify(new X509Certificate(caPem).publicKey))
    throw new Error(`${APISERVER_CERT} is not signed by the cluster CA`);
  return { certPem, caPem, tokenSha256: createHash('sha256').update(`Bearer ${token}`).digest('hex') };
}
