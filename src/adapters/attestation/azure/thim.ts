/**
 * Azure's THIM cache of AMD certificates, served by IMDS inside the VM: the VCEK of the host and
 * its chain, for the azure-sev-snp issuer's InstanceInfo.
 */
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';
import { certificatePem, loadCertificates } from '../shared/certs.js';

/** PEM certificates for azure-sev-snp's InstanceInfo. */
export interface SnpSignerCertificates {
  /** The VCEK (PEM or DER). */
  reportSigner?: Uint8Array;
  /** The ASK and ARK (PEM). */
  certChain?: Uint8Array;
}

/** Azure IMDS. */
export const AZURE_IMDS_URL = 'http://169.254.169.254';

/**
 * Fetches the VCEK and its chain (ASK, ARK) of this host from Azure's THIM cache through IMDS
 * (`GET /metadata/THIM/amd/certification`, header `Metadata: true`, JSON `vcekCert`,
 * `certificateChain`). The certificates are checked to parse; trust is the validator's business.
 */
export async function fetchAzureThimCertificates(
  baseUrl: string = AZURE_IMDS_URL,
  options?: CallOptions & { timeoutInMs?: number },
): Promise<SnpSignerCertificates> {
  const url = `${baseUrl.replace(/\/+$/, '')}/metadata/THIM/amd/certification`;
  const timeout = AbortSignal.timeout(options?.timeoutInMs ?? 10_000);
  const signal = options?.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  try {
    const res = await httpRequest({ url, headers: { Metadata: 'true' }, signal });
    const body = parseJsonBody(expectOk(res, 'THIM'), 'THIM response') as Record<string, unknown> | null;
    const vcek = body?.vcekCert;
    const chain = body?.certificateChain;
    if (typeof vcek !== 'string' || typeof chain !== 'string')
      throw new ConfbootError('internal', 'THIM response has no vcekCert/certificateChain strings');
    const reportSigner = certificatePem(new TextEncoder().encode(vcek), 'THIM vcekCert');
    let certs: number;
    try {
      certs = loadCertificates(chain, 'THIM certificateChain').length;
    } catch (err) {
      throw new ConfbootError('internal', (err as Error).message, { cause: err });
    }
    if (certs === 0) throw new ConfbootError('internal', 'THIM certificateChain holds no PEM certificate');
    return { reportSigner, certChain: new TextEncoder().encode(chain) };
  } catch (err) {
    throw wrapError(`fetching the VCEK from ${url}`, err, timeout.aborted ? 'deadline-exceeded' : undefined);
  }
}
