/**
 * A FAKE AMD key hierarchy for tests that need reports the real vectors cannot provide (a chosen
 * report_data, VMPL or TCB with a valid signature): an RSA-PSS/SHA-384 "ARK-Milan" → "SEV-Milan" /
 * "SEV-VLEK-Milan" → P-384 "SEV-VCEK"/"SEV-VLEK" with AMD's extensions, and a report builder that
 * signs like the AMD-SP (little-endian R and S). Nothing here is trusted outside tests.
 */
import 'reflect-metadata';
import { sign as cryptoSign, KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { SnpTcbParts } from '../../../../src/adapters/attestation/snp/report.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const subtle = webcrypto.subtle;
const RSA_PSS = {
  name: 'RSA-PSS',
  hash: 'SHA-384',
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
};
const PSS_SIGN = { name: 'RSA-PSS', saltLength: 48 };
const AMD_DN = 'OU=Engineering, C=US, L=Santa Clara, ST=CA, O=Advanced Micro Devices';

function derInt(v: number): Uint8Array {
  return v < 0x80 ? Uint8Array.of(0x02, 1, v) : Uint8Array.of(0x02, 2, 0, v);
}
function derIa5(s: string): Uint8Array {
  return Uint8Array.from([0x16, s.length, ...Buffer.from(s)]);
}

/** A fake signer (VCEK or VLEK) with its chain, all PEM. */
export interface FakeAmdPki {
  arkPem: string;
  askPem: string;
  asvkPem: string;
  vcekPem: string;
  vlekPem: string;
  vcekKey: KeyObject;
  vlekKey: KeyObject;
  chipId: Uint8Array;
  tcb: SnpTcbParts;
  /** The fake ARK's and ASK's private keys (RSA-PSS), for CRLs. */
  arkSigningKey: webcrypto.CryptoKey;
  askSigningKey: webcrypto.CryptoKey;
}

const NOT_BEFORE = new Date('2024-01-01T00:00:00Z');
const NOT_AFTER = new Date('2034-01-01T00:00:00Z');

/** Creates the fake hierarchy (a few hundred ms: two RSA keys). */
export async function createFakeAmdPki(
  tcb: SnpTcbParts = { bl: 3, tee: 0, snp: 20, ucode: 200 },
): Promise<FakeAmdPki> {
  const arkKeys = (await subtle.generateKey(RSA_PSS, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const askKeys = (await subtle.generateKey(RSA_PSS, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const ecParams = { name: 'ECDSA', namedCurve: 'P-384' };
  const vcekKeys = (await subtle.generateKey(ecParams, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const vlekKeys = (await subtle.generateKey(ecParams, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const chipId = new Uint8Array(64).map((_, i) => (i * 7 + 3) & 0xff);
  const cert = (
    serial: string,
    cn: string,
    issuerCn: string,
    key: webcrypto.CryptoKey,
    signer: webcrypto.CryptoKey,
    extensions: x509.Extension[] = [],
  ) =>
    x509.X509CertificateGenerator.create({
      serialNumber: serial,
      subject: `CN=${cn}, ${AMD_DN}`,
      issuer: `CN=${issuerCn}, ${AMD_DN}`,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      publicKey: key,
      signingKey: signer,
      signingAlgorithm: PSS_SIGN,
      extensions,
    });
  const ark = await cert('01', 'ARK-Milan', 'ARK-Milan', arkKeys.publicKey, arkKeys.privateKey);
  const ask = await cert('02', 'SEV-Milan', 'ARK-Milan', askKeys.publicKey, arkKeys.privateKey);
  const asvk = await cert('03', 'SEV-VLEK-Milan', 'ARK-Milan', askKeys.publicKey, arkKeys.privateKey);
  const splExts = (product: string) => [
    new x509.Extension('1.3.6.1.4.1.3704.1.2', false, derIa5(product)),
    new x509.Extension('1.3.6.1.4.1.3704.1.3.1', false, derInt(tcb.bl)),
    new x509.Extension('1.3.6.1.4.1.3704.1.3.2', false, derInt(tcb.tee)),
    new x509.Extension('1.3.6.1.4.1.3704.1.3.3', false, derInt(tcb.snp)),
    new x509.Extension('1.3.6.1.4.1.3704.1.3.8', false, derInt(tcb.ucode)),
  ];
  const vcek = await cert('04', 'SEV-VCEK', 'SEV-Milan', vcekKeys.publicKey, askKeys.privateKey, [
    ...splExts('Milan-B0'),
    new x509.Extension('1.3.6.1.4.1.3704.1.4', false, chipId),
  ]);
  const vlek = await cert('05', 'SEV-VLEK', 'SEV-VLEK-Milan', vlekKeys.publicKey, askKeys.privateKey, [
    ...splExts('Milan'),
    new x509.Extension('1.3.6.1.4.1.3704.1.5', false, derIa5('CN=fake-csp.example')),
  ]);
  return {
    arkPem: ark.toString('pem'),
    askPem: ask.toString('pem'),
    asvkPem: asvk.toString('pem'),
    vcekPem: vcek.toString('pem'),
    vlekPem: vlek.toString('pem'),
    vcekKey: KeyObject.from(vcekKeys.privateKey),
    vlekKey: KeyObject.from(vlekKeys.privateKey),
    chipId,
    tcb,
    arkSigningKey: arkKeys.privateKey,
    askSigningKey: askKeys.privateKey,
  };
}

/** Serial numbers of the fake hierarchy's certificates (hex). */
export const FAKE_SERIALS = { ark: '01', ask: '02', asvk: '03', vcek: '04', vlek: '05' } as const;

/**
 * A FAKE AMD CRL (DER) issued by the fake ARK-Milan (or, with `issuer: 'ask'`, by SEV-Milan), signed
 * with RSA-PSS/SHA-384 as AMD's, revoking `revoked` (hex serials); valid 2024–2034 unless told.
 */
export async function createFakeAmdCrl(
  pki: FakeAmdPki,
  options: { revoked?: string[]; issuer?: 'ark' | 'ask'; thisUpdate?: Date; nextUpdate?: Date } = {},
): Promise<Uint8Array> {
  const byAsk = options.issuer === 'ask';
  const crl = await x509.X509CrlGenerator.create({
    issuer: `CN=${byAsk ? 'SEV-Milan' : 'ARK-Milan'}, ${AMD_DN}`,
    thisUpdate: options.thisUpdate ?? NOT_BEFORE,
    nextUpdate: options.nextUpdate ?? NOT_AFTER,
    entries: (options.revoked ?? []).map((serialNumber) => ({ serialNumber, revocationDate: NOT_BEFORE })),
    signingKey: byAsk ? pki.askSigningKey : pki.arkSigningKey,
    signingAlgorithm: PSS_SIGN,
  });
  return new Uint8Array(crl.rawData);
}

/** Fields of a fake report; unspecified TCBs default to the PKI's TCB. */
export interface FakeReportFields {
  version?: number;
  policy?: bigint;
  vmpl?: number;
  reportData?: Uint8Array;
  idKeyDigest?: Uint8Array;
  signingKey?: 'vcek' | 'vlek';
  currentTcb?: SnpTcbParts;
  reportedTcb?: SnpTcbParts;
  committedTcb?: SnpTcbParts;
  launchTcb?: SnpTcbParts;
  /** Version-5 mitigation vectors (written at 0x1F8 and 0x200 whatever the version). */
  launchMitVector?: bigint;
  currentMitVector?: bigint;
}

function tcbU64(t: SnpTcbParts): bigint {
  return BigInt(t.bl) | (BigInt(t.tee) << 8n) | (BigInt(t.snp) << 48n) | (BigInt(t.ucode) << 56n);
}

/** Builds and signs a 0x4A0-byte Milan report with the fake VCEK or VLEK. */
export function buildFakeReport(pki: FakeAmdPki, f: FakeReportFields = {}): Uint8Array {
  const r = new Uint8Array(0x4a0);
  const dv = new DataView(r.buffer);
  const kind = f.signingKey ?? 'vcek';
  dv.setUint32(0x00, f.version ?? 2, true);
  dv.setBigUint64(0x08, f.policy ?? 0x30000n, true);
  dv.setUint32(0x30, f.vmpl ?? 0, true);
  dv.setUint32(0x34, 1, true);
  dv.setBigUint64(0x38, tcbU64(f.currentTcb ?? pki.tcb), true);
  dv.setUint32(0x48, kind === 'vlek' ? 1 << 2 : 0, true);
  if (f.reportData) r.set(f.reportData, 0x50);
  if (f.idKeyDigest) r.set(f.idKeyDigest, 0xe0);
  dv.setBigUint64(0x180, tcbU64(f.reportedTcb ?? pki.tcb), true);
  if (kind === 'vcek') r.set(pki.chipId, 0x1a0);
  dv.setBigUint64(0x1e0, tcbU64(f.committedTcb ?? pki.tcb), true);
  dv.setBigUint64(0x1f0, tcbU64(f.launchTcb ?? pki.tcb), true);
  if (f.launchMitVector !== undefined) dv.setBigUint64(0x1f8, f.launchMitVector, true);
  if (f.currentMitVector !== undefined) dv.setBigUint64(0x200, f.currentMitVector, true);
  const sig = cryptoSign('sha384', r.subarray(0, 0x2a0), {
    key: kind === 'vlek' ? pki.vlekKey : pki.vcekKey,
    dsaEncoding: 'ieee-p1363',
  });
  r.set(Uint8Array.from(sig.subarray(0, 48)).reverse(), 0x2a0);
  r.set(Uint8Array.from(sig.subarray(48, 96)).reverse(), 0x2e8);
  return r;
}

/**
 * An SEV-SNP attestation config (JSON) for a validator trusting `pki`: its ARK pinned, its TCB as the
 * minimum, PCRs 4 and 15 zero (a fresh swtpm); `extra` overrides fields. AMD's CRL is not checked
 * (`amdCRL: "off"`): these fixtures have no KDS to serve one; test/adapters/attestation/snp/policy-knobs
 * tests the CRL against a fake KDS.
 */
export function fakeAmdAttestationConfig(pki: FakeAmdPki, extra: Record<string, unknown> = {}): string {
  const zero = '00'.repeat(32);
  return JSON.stringify({
    measurements: { 4: zero, 15: zero },
    bootloaderVersion: pki.tcb.bl,
    teeVersion: pki.tcb.tee,
    snpVersion: pki.tcb.snp,
    microcodeVersion: pki.tcb.ucode,
    amdRootKey: pki.arkPem,
    amdCRL: 'off',
    ...extra,
  });
}
