/**
 * Azure trusted launch instance info: the AK certificate read from NV index 0x01c101d0 (a stub
 * reader here) and its CA fetched from the certificate's CA Issuers URL (a FAKE Azure CA server on
 * loopback HTTP), returned as upstream's JSON {AkCert, CA}. SYNTHETIC certificates (@peculiar/x509):
 * no Azure VM exists here. A certificate without the URL, a failing server or a body that is not a
 * certificate are refused, naming the step.
 */
import { webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AZURE_AK_CERT_NV_INDEX,
  azureTrustedLaunchInfo,
} from '../../../../src/adapters/attestation/azure/trusted-launch-info.js';
import { loadX509 } from '../../../../src/adapters/pki/x509-loader.js';

const x509 = await loadX509();
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const VALIDITY = { notBefore: new Date('2026-01-01T00:00:00Z'), notAfter: new Date('2027-01-01T00:00:00Z') };

let server: Server;
let baseUrl = '';
let caDer = new Uint8Array(0);
const reads: number[] = [];

async function akCertDer(caIssuers: string | undefined): Promise<Uint8Array> {
  const caKeys = await webcrypto.subtle.generateKey(ALG, false, ['sign', 'verify']);
  const akKeys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const ak = await x509.X509CertificateGenerator.create({
    serialNumber: '03',
    subject: 'CN=vm-ak',
    issuer: 'CN=Test Azure VM AK CA',
    publicKey: akKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: caIssuers === undefined ? [] : [new x509.AuthorityInfoAccessExtension({ caIssuers })],
    ...VALIDITY,
  });
  return new Uint8Array(ak.rawData);
}

const reader = (der: Uint8Array) => async (index: number) => {
  reads.push(index);
  return der;
};

beforeAll(async () => {
  const caKeys = await webcrypto.subtle.generateKey(ALG, false, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '02',
    name: 'CN=Test Azure VM AK CA',
    keys: caKeys,
    signingAlgorithm: ALG,
    ...VALIDITY,
  });
  caDer = new Uint8Array(ca.rawData);
  server = createServer((req, res) => {
    if (req.url === '/ca.crt') res.end(Buffer.from(caDer));
    else if (req.url === '/junk.crt') res.end('not a certificate');
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('azureTrustedLaunchInfo', () => {
  it('returns {AkCert, CA}: the NV certificate and the CA from its CA Issuers URL', async () => {
    const ak = await akCertDer(`${baseUrl}/ca.crt`);
    reads.length = 0;
    const info = JSON.parse(new TextDecoder().decode(await azureTrustedLaunchInfo(reader(ak))));
    expect(info).toEqual({
      AkCert: Buffer.from(ak).toString('base64'),
      CA: Buffer.from(caDer).toString('base64'),
    });
    expect(reads).toEqual([AZURE_AK_CERT_NV_INDEX]);
    expect(AZURE_AK_CERT_NV_INDEX).toBe(0x01c101d0);
  });

  it.each([
    ['a certificate without a CA Issuers URL', undefined, 'AK certificate names no CA Issuers URL'],
    ['a CA server answering 404', '/missing.crt', 'AK CA certificate from'],
    ['a CA body that is not a certificate', '/junk.crt', ''],
  ])('refuses %s', async (_n, path, text) => {
    const ak = await akCertDer(path === undefined ? undefined : `${baseUrl}${path}`);
    await expect(azureTrustedLaunchInfo(reader(ak))).rejects.toThrow(
      expect.objectContaining({
        message: expect.stringMatching(new RegExp(`^reading Azure trusted launch instance info: .*${text}`)),
      }),
    );
  });

  it('refuses an NV index that holds no certificate', async () => {
    await expect(azureTrustedLaunchInfo(reader(new Uint8Array([1, 2, 3])))).rejects.toThrow(
      /^reading Azure trusted launch instance info: /,
    );
  });
});
