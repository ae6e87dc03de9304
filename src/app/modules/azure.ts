/**
 * The Azure node module (app layer, DI wiring): MetadataAPI on IMDS and the ARM compute and network
 * APIs, and the Issuer of the node's variant, each a vTPM quote with the HCL-provisioned AK
 * (0x81000003): azure-trustedlaunch with instance info `{"AkCert","CA"}` — the AK certificate from
 * TPM NV index 0x1C101D0 and its issuing CA, downloaded from the certificate's CA Issuers
 * URL; azure-sev-snp with the HCL's SNP report (NV 0x01400001) and the VCEK from THIM;
 * azure-tdx with the HCL's TDREPORT turned into a quote by IMDS `/acc/tdquote`. The ARM SDKs are
 * loaded lazily by the adapter.
 */

import type { ContainerModule } from 'inversify';
import { tpm2NvReader } from '../../adapters/attestation/azure/nv-reader.js';
import { imdsTdQuoteGetter } from '../../adapters/attestation/azure/tdquote.js';
import { AZURE_IMDS_URL, fetchAzureThimCertificates } from '../../adapters/attestation/azure/thim.js';
import { azureTrustedLaunchInfo } from '../../adapters/attestation/azure/trusted-launch-info.js';
import { createAzureSevSnpIssuer } from '../../adapters/attestation/snp/issuers.js';
import { createAzureTdxIssuer } from '../../adapters/attestation/tdx/azure-issuer.js';
import { LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import { AzureMetadataAPI } from '../../adapters/cloud/azure/metadata-api.js';
import { cloudBindingsModule, cloudVtpmIssuer } from './cloud-wiring.js';

/** npm packages of this cloud's SDK. */
export const SDK_PACKAGES: readonly string[] = Object.freeze(['@azure/arm-compute', '@azure/arm-network']);

/** Loads this cloud's SDK now; for the module-isolation check (`--preload-sdk`). */
export async function preloadSdk(): Promise<void> {
  await Promise.all([import('@azure/arm-compute'), import('@azure/arm-network')]);
}

/** The Azure module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule({
    metadata: (c, logger) =>
      new AzureMetadataAPI({
        ...(c.metadata.baseUrl === undefined ? {} : { imdsBaseUrl: c.metadata.baseUrl }),
        ...(c.metadata.apiEndpoint === undefined ? {} : { armEndpoint: c.metadata.apiEndpoint }),
        logger,
      }),
    issuer: (c, tpm) => {
      const imds = c.metadata.baseUrl ?? AZURE_IMDS_URL;
      const readNvIndex = tpm2NvReader({ tcti: c.tcti });
      if (c.variant === 'azure-sev-snp')
        return createAzureSevSnpIssuer({
          tpm,
          readNvIndex,
          certificates: (options) => fetchAzureThimCertificates(imds, options),
          eventLogPath: LINUX_EVENT_LOG_PATH,
        });
      if (c.variant === 'azure-tdx')
        return createAzureTdxIssuer({
          tpm,
          readNvIndex,
          getQuote: imdsTdQuoteGetter({ baseUrl: imds }),
          eventLogPath: LINUX_EVENT_LOG_PATH,
        });
      return cloudVtpmIssuer('azure-trustedlaunch', (_cfg, options) =>
        azureTrustedLaunchInfo(readNvIndex, options),
      )(c, tpm);
    },
  });
}
