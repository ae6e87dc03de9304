/**
 * The instance info of azure-trustedlaunch: the AK certificate Azure provisions in the vTPM's NV
 * index 0x01c101d0 and its issuing CA, downloaded from the certificate's CA Issuers URL, as Go JSON
 * `{"AkCert": DER, "CA": DER}` (base64). The validator chains them to a configured root.
 */
import { X509Certificate } from 'node:crypto';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest } from '../../http/request.js';
import type { NvIndexReader } from './nv-reader.js';

/** TPM NV index holding the AK certificate on Azure trusted launch VMs. */
export const AZURE_AK_CERT_NV_INDEX = 0x01c101d0;

/** The `CA Issuers` URL of a certificate's Authority Information Access extension. */
function caIssuersUrl(cert: X509Certificate): string {
  for (const line of (cert.infoAccess ?? '').split('\n')) {
    const m = /^CA Issuers - URI:(\S+)$/.exec(line.trim());
    if (m?.[1]) return m[1];
  }
  throw new ConfbootError('failed-precondition', 'AK certificate names no CA Issuers URL');
}

/**
 * Builds azure-trustedlaunch's instance info `{"AkCert": DER, "CA": DER}` (Go JSON, base64) from the
 * AK certificate that `readNvIndex` reads from NV index {@link AZURE_AK_CERT_NV_INDEX}.
 */
export async function azureTrustedLaunchInfo(
  readNvIndex: NvIndexReader,
  options?: CallOptions,
): Promise<Uint8Array> {
  try {
    const akCertDer = Buffer.from(await readNvIndex(AZURE_AK_CERT_NV_INDEX, options));
    const cert = new X509Certificate(akCertDer);
    const url = caIssuersUrl(cert);
    const res = await httpRequest({ url, ...(options?.signal ? { signal: options.signal } : {}) });
    const caDer = expectOk(res, `AK CA certificate from ${url}`).body;
    new X509Certificate(caDer); // fail here, not at the verifier, if it is not a certificate
    return new TextEncoder().encode(
      JSON.stringify({ AkCert: akCertDer.toString('base64'), CA: caDer.toString('base64') }),
    );
  } catch (err) {
    throw wrapError('reading Azure trusted launch instance info', err);
  }
}
