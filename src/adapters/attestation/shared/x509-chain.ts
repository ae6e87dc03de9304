/**
 * X.509 chain verification for attestation-key certificates (azure-trustedlaunch's AK cert, the GCE
 * AK cert of a raw go-tpm-tools attestation). Roots are always configuration, never embedded
 * (operators configure trust anchors); the time is an argument so expired chains can be judged at a
 * chosen instant. Unknown critical extensions are not rejected (GCE AK certs carry a critical SAN with
 * only a directoryName). @peculiar/x509 is loaded on first use (src/adapters/pki/x509-loader.ts), so
 * importing this module (the validators do, at the join service's start) does not load it.
 */
import type { X509Certificate } from '@peculiar/x509';
import { AttestationError, messageOf } from '../../../ports/errors.js';
import { loadX509, type X509Module } from '../../pki/x509-loader.js';
import type { CheckRecorder } from './checks.js';

/**
 * Parses DER or PEM certificate bytes; every PEM block in the input is returned. Loads
 * @peculiar/x509 on the first call.
 * @throws AttestationError (`check`, default `ak-certificate`) "parsing `what`: …"
 */
export async function parseCertificates(
  data: Uint8Array | string,
  what: string,
  check = 'ak-certificate',
): Promise<X509Certificate[]> {
  const x509 = await loadX509();
  try {
    const text = typeof data === 'string' ? data : Buffer.from(data).toString('latin1');
    if (text.includes('-----BEGIN CERTIFICATE-----')) {
      const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
      return blocks.map((b) => new x509.X509Certificate(b));
    }
    return [
      new x509.X509Certificate(typeof data === 'string' ? Buffer.from(data, 'latin1') : Buffer.from(data)),
    ];
  } catch (err) {
    throw new AttestationError(check, `parsing ${what}: ${messageOf(err)}`, {
      cause: err,
    });
  }
}

/**
 * Awaits `work` inside a validation: an AttestationError it rejects with (e.g. from
 * {@link parseCertificates}) is recorded by `rec` as a failed check and rethrown with every check so
 * far, as CheckRecorder.run does for a synchronous parser.
 */
export async function recordAsync<T>(rec: Pick<CheckRecorder, 'run'>, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    return rec.run(() => {
      throw err;
    });
  }
}

function isCa(x509: X509Module, cert: X509Certificate): boolean {
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  return bc?.ca === true;
}

function checkValidity(cert: X509Certificate, at: Date, check: string): void {
  if (at < cert.notBefore || at > cert.notAfter) {
    throw new AttestationError(
      check,
      `certificate ${certName(cert)} is not valid at ${at.toISOString()} (valid ${cert.notBefore.toISOString()} … ${cert.notAfter.toISOString()})`,
    );
  }
}

async function signedBy(cert: X509Certificate, issuer: X509Certificate): Promise<boolean> {
  if (cert.issuer !== issuer.subject) return false;
  try {
    return await cert.verify({ publicKey: issuer, signatureOnly: true });
  } catch {
    return false;
  }
}

/**
 * Verifies that `leaf` chains through `intermediates` to one of `roots`, every certificate valid at
 * `at`, issuers being CAs. Returns the chain leaf-first, root last.
 * @throws AttestationError (`check`, default `ak-certificate`) naming the certificate that failed
 */
export async function verifyCertificateChain(
  leaf: X509Certificate,
  intermediates: X509Certificate[],
  roots: X509Certificate[],
  at: Date,
  check = 'ak-certificate',
): Promise<X509Certificate[]> {
  if (roots.length === 0) throw new AttestationError(check, 'no trusted roots configured');
  // Certificates exist only once the library is loaded, so this resolves at once.
  const x509 = await loadX509();
  const chain = [leaf];
  checkValidity(leaf, at, check);
  let current = leaf;
  for (let depth = 0; depth < 8; depth++) {
    for (const root of roots) {
      if (await signedBy(current, root)) {
        checkValidity(root, at, check);
        chain.push(root);
        return chain;
      }
    }
    let next: X509Certificate | undefined;
    for (const c of intermediates) {
      if (chain.some((x) => x.equal(c))) continue;
      if (await signedBy(current, c)) {
        next = c;
        break;
      }
    }
    if (!next) {
      throw new AttestationError(
        check,
        `certificate ${certName(current)} is not signed by a trusted root or given intermediate (issuer "${current.issuer}")`,
      );
    }
    if (!isCa(x509, next)) throw new AttestationError(check, `intermediate "${next.subject}" is not a CA`);
    checkValidity(next, at, check);
    chain.push(next);
    current = next;
  }
  throw new AttestationError(check, 'certificate chain is too long');
}

/** A name for messages: the subject, or the serial and issuer when the subject is empty (GCE AK certs). */
export function certName(cert: X509Certificate): string {
  return cert.subject ? `"${cert.subject}"` : `serial ${cert.serialNumber} from "${cert.issuer}"`;
}

/** The certificate's public key as SPKI DER. */
export function certificateSpki(cert: X509Certificate): Buffer {
  return Buffer.from(cert.publicKey.rawData);
}
