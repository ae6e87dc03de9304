/**
 * The SEV-SNP check steps about who signed a report (verify.ts runs them in order): the signer
 * certificate and its kind, the report signature, the pinned ARK, the ASK/ASVK and the chain to the
 * signer, and certificate validity. Each step records its checks and goes on, so a rejection lists
 * every reason.
 */
import { verify as cryptoVerify, timingSafeEqual, type X509Certificate } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import { type CertificateInput, commonName, loadCertificate } from '../shared/certs.js';
import type { CheckRecorder } from '../shared/checks.js';
import { checkCertificateValidity } from '../shared/hardware-checks.js';
import { type AmdSignerInfo, amdNames, amdSignerInfo } from './amd-certs.js';
import type { SnpChain, SnpPolicy } from './policy.js';
import { type AmdProduct, formatTcb, type SnpReport } from './report.js';

/** What every SEV-SNP check step reads, and the recorder it writes to. */
export interface SnpCheckContext {
  report: SnpReport;
  policy: SnpPolicy;
  product: AmdProduct;
  /** The ARK pinned for `product`. */
  pinned: X509Certificate;
  /** When certificates must be valid. */
  at: Date;
  rec: CheckRecorder;
  /** Findings that do not fail validation. */
  warnings: string[];
}

/** The report signer once its certificate could be read. */
export interface SnpSigner {
  cert: X509Certificate;
  info: AmdSignerInfo;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Verifies an SNP report's ECDSA P-384 signature with `signer`'s public key. */
export function verifySnpSignature(report: SnpReport, signer: X509Certificate): boolean {
  if (report.signatureHasHighBytes) return false;
  const sig = Buffer.concat([report.signatureR, report.signatureS]);
  try {
    return cryptoVerify(
      'sha384',
      report.signedBytes,
      { key: signer.publicKey, dsaEncoding: 'ieee-p1363' },
      sig,
    );
  } catch {
    return false;
  }
}

/**
 * `signer-certificate` (a VCEK or VLEK with AMD's extensions) and `signing-key` (the report names
 * that kind of key, and the policy allows it). Returns the signer when its certificate is readable.
 */
export function checkSigner(ctx: SnpCheckContext, input: CertificateInput): SnpSigner | undefined {
  const { rec, report, policy } = ctx;
  let signer: SnpSigner;
  try {
    const cert = loadCertificate(input, 'report signer certificate');
    signer = { cert, info: amdSignerInfo(cert) };
  } catch (err) {
    rec.record('signer-certificate', false, messageOf(err));
    return undefined;
  }
  const { info } = signer;
  rec.pass('signer-certificate', `${info.kind.toUpperCase()} ${info.productName} tcb ${formatTcb(info.tcb)}`);
  // The report says which key signed it; it must be the kind of certificate we were given.
  const allowed = policy.allowedSigners ?? ['vcek', 'vlek'];
  const kind = report.signerInfo.signingKey;
  if (kind !== info.kind)
    rec.record(
      'signing-key',
      false,
      `report says signing key ${kind}, certificate is a ${info.kind.toUpperCase()}`,
    );
  else if (!allowed.includes(info.kind))
    rec.record(
      'signing-key',
      false,
      `report signed by the ${info.kind.toUpperCase()}, policy allows ${allowed.map((k) => k.toUpperCase()).join(' or ')} only`,
    );
  else rec.pass('signing-key', info.kind.toUpperCase());
  return signer;
}

/** `signature-algorithm` and, with a signer, `report-signature`. */
export function checkSignature(ctx: SnpCheckContext, signer: SnpSigner | undefined): void {
  const { rec, report } = ctx;
  rec.record(
    'signature-algorithm',
    report.signatureAlgo === 1,
    report.signatureAlgo === 1
      ? 'ECDSA P-384 with SHA-384'
      : `unsupported signature algorithm ${report.signatureAlgo}`,
  );
  if (signer === undefined) return;
  const ok = verifySnpSignature(report, signer.cert);
  const why = report.signatureHasHighBytes
    ? 'non-zero bytes outside R and S in the signature field'
    : 'does not verify with the signer certificate';
  rec.record(
    'report-signature',
    ok,
    ok ? 'verifies with the signer certificate' : `report signature verification error: ${why}`,
  );
}

/** `ark-pinned`: the pinned ARK is a self-signed ARK of the product, and the chain's ARK (if any) is it. */
export function checkArk(ctx: SnpCheckContext, chain: SnpChain): void {
  const { pinned } = ctx;
  const names = amdNames(ctx.product);
  const pinnedOk = pinned.verify(pinned.publicKey) && commonName(pinned.subject) === names.ark;
  let arkOk = pinnedOk;
  let arkDetail = pinnedOk ? `${names.ark} pinned` : `pinned ARK is not a self-signed ${names.ark}`;
  if (chain.ark !== undefined) {
    try {
      const given = loadCertificate(chain.ark, 'ARK from the chain');
      if (!bytesEqual(given.raw, pinned.raw)) {
        arkOk = false;
        arkDetail = `the chain's ARK (${commonName(given.subject)}, sha256 ${given.fingerprint256}) is not the pinned ${names.ark}`;
      }
    } catch (err) {
      arkOk = false;
      arkDetail = messageOf(err);
    }
  }
  ctx.rec.record('ark-pinned', arkOk, arkDetail);
}

/**
 * `ask-signature` (the ASK, or for a VLEK the ASVK, signed by the pinned ARK) and, with a signer,
 * `signer-chain` (the signer signed by it). Returns the ASK when it is readable.
 */
export function checkAsk(
  ctx: SnpCheckContext,
  chain: SnpChain,
  signer: SnpSigner | undefined,
): X509Certificate | undefined {
  const { rec, pinned } = ctx;
  const names = amdNames(ctx.product);
  if (chain.ask === undefined) {
    rec.record('ask-signature', false, 'no ASK/ASVK supplied');
    return undefined;
  }
  let ask: X509Certificate | undefined;
  try {
    ask = loadCertificate(chain.ask, 'ASK');
    const want = signer?.info.kind === 'vlek' ? names.asvk : names.ask;
    const cn = commonName(ask.subject);
    if (cn !== want)
      rec.record('ask-signature', false, `intermediate CN is ${JSON.stringify(cn)}, want ${want}`);
    else if (!ask.verify(pinned.publicKey))
      rec.record(
        'ask-signature',
        false,
        `${cn} signature does not verify with the pinned ${names.ark} (RSASSA-PSS)`,
      );
    else rec.pass('ask-signature', `${cn} signed by ${names.ark}`);
  } catch (err) {
    rec.record('ask-signature', false, messageOf(err));
  }
  if (signer !== undefined && ask !== undefined) {
    const ok = signer.cert.verify(ask.publicKey);
    const leaf = commonName(signer.cert.subject);
    rec.record(
      'signer-chain',
      ok,
      ok
        ? `${leaf} signed by ${commonName(ask.subject)}`
        : `${leaf} signature does not verify with ${commonName(ask.subject)} (RSASSA-PSS)`,
    );
  }
  return ask;
}

/** `certificate-validity`: the pinned ARK, the ASK and the signer are valid at `ctx.at`. */
export function checkChainValidity(
  ctx: SnpCheckContext,
  ask: X509Certificate | undefined,
  signer: SnpSigner | undefined,
): void {
  const certs = [ctx.pinned, ...(ask ? [ask] : []), ...(signer ? [signer.cert] : [])];
  checkCertificateValidity(ctx.rec, certs, ctx.at);
}
