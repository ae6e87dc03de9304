import { awsNitroTpmChecks } from '../../adapters/attestation/variants/aws-nitro-tpm.js';
import {
  azureTrustedLaunchChecks,
  azureTrustedLaunchCvmCheck,
} from '../../adapters/attestation/variants/azure-trustedlaunch.js';
import { gceSevCvmCheck, gcpSevEsChecks } from '../../adapters/attestation/variants/gcp-sev-es.js';
import { qemuVtpmChecks, qemuVtpmChecksWith } from '../../adapters/attestation/variants/qemu-vtpm.js';
import { LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import { SERVICE_BASE_PATH } from '../defaults.js';
import { snpVariant, tdxVariant } from './cvm-variants.js';
import { awsNitroTpmIssuer, azureNv, gceInstance, tsm } from './node-issuers.js';
import {
  amdLookups,
  azureAkRootLookups,
  ec2Lookups,
  gceLookups,
  missingLookup,
  qemuAkLookups,
} from './validator-deps.js';
import type { VariantEntry } from './variant-entry.js';
import { vtpmVariant } from './vtpm-variant.js';

/**
 * The OID of the `dummy` variant, which has no entry: test fakes attest under it, and every
 * production service refuses it (no validator accepts it).
 */
export const DUMMY_OID = '1.3.9900.1.1';

/**
 * variant → entry, ONE entry per variant. The order matters: the first variant naming a cloud is its
 * default. `dummy` is not here: it exists in test code only.
 */
export const VARIANTS: Record<string, VariantEntry> = {
  'gcp-sev-es': vtpmVariant('gcp-sev-es', {
    oid: '1.3.9900.3.1',
    clouds: ['gcp'],
    checks: (deps) => {
      if (deps.gceShieldedIdentity === undefined) throw missingLookup('GCE shielded identity lookup');
      return gcpSevEsChecks(deps.gceShieldedIdentity);
    },
    cvm: () => gceSevCvmCheck,
    instanceInfo: gceInstance,
    lookups: gceLookups,
  }),
  'gcp-sev-snp': snpVariant(
    'gcp-sev-snp',
    '1.3.9900.3.2',
    ['gcp'],
    async (node, oid) => {
      const { createGcpSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
      return createGcpSevSnpIssuer({
        oid,
        tpm: node.tpm,
        device: await tsm('sev-snp'),
        gceInstance: await gceInstance(node),
        eventLogPath: LINUX_EVENT_LOG_PATH,
      });
    },
    {
      akFromGce: true,
      lookups: async (settings, clock) => ({ ...amdLookups(settings, clock), ...(await gceLookups()) }),
    },
  ),
  'azure-trustedlaunch': vtpmVariant('azure-trustedlaunch', {
    oid: '1.3.9900.4.2',
    clouds: ['azure'],
    checks: (deps) => azureTrustedLaunchChecks({ akRoots: deps.azureAkRoots ?? [], clock: deps.clock }),
    cvm: () => azureTrustedLaunchCvmCheck,
    instanceInfo: async (node) => {
      const { azureTrustedLaunchInfo } = await import(
        '../../adapters/attestation/azure/trusted-launch-info.js'
      );
      const nv = await azureNv(node);
      return (options) => azureTrustedLaunchInfo(nv, options);
    },
    lookups: azureAkRootLookups,
    deploy: {
      configFiles: {
        azureAkRoots:
          '# The PEM certificates of the Azure AK roots to trust (docs/attestation-config.md): without one, no azure-trustedlaunch node is admitted\n',
      },
      lookupFlags: [`--azure-ak-roots=${SERVICE_BASE_PATH}/azureAkRoots`],
    },
  }),
  'azure-sev-snp': snpVariant('azure-sev-snp', '1.3.9900.4.1', ['azure'], async (node, oid) => {
    const { createAzureSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
    const { AZURE_IMDS_URL, fetchAzureThimCertificates } = await import(
      '../../adapters/attestation/azure/thim.js'
    );
    const imds = node.config.metadata.baseUrl ?? AZURE_IMDS_URL;
    return createAzureSevSnpIssuer({
      oid,
      tpm: node.tpm,
      readNvIndex: await azureNv(node),
      certificates: (options) => fetchAzureThimCertificates(imds, options),
      eventLogPath: LINUX_EVENT_LOG_PATH,
    });
  }),
  'azure-tdx': tdxVariant(
    'azure-tdx',
    '1.3.9900.4.3',
    ['azure'],
    async (node, oid) => {
      const { AZURE_IMDS_URL } = await import('../../adapters/attestation/azure/thim.js');
      const { imdsTdQuoteGetter } = await import('../../adapters/attestation/azure/tdquote.js');
      const { createAzureTdxIssuer } = await import('../../adapters/attestation/tdx/azure-issuer.js');
      return createAzureTdxIssuer({
        oid,
        tpm: node.tpm,
        readNvIndex: await azureNv(node),
        getQuote: imdsTdQuoteGetter({ baseUrl: node.config.metadata.baseUrl ?? AZURE_IMDS_URL }),
        eventLogPath: LINUX_EVENT_LOG_PATH,
      });
    },
    {
      qeSVN: 0,
      pceSVN: 0,
      teeTCBSVN: '00'.repeat(16),
      qeVendorID: '939a7233f79c4ca9940a0db3957f0607',
      xfam: 'e702060000000000',
    },
  ),
  'aws-nitro-tpm': vtpmVariant('aws-nitro-tpm', {
    oid: '1.3.9900.2.1',
    clouds: ['aws'],
    checks: (deps) => {
      if (deps.amiTpmSupport === undefined) throw missingLookup('EC2 AMI lookup');
      return awsNitroTpmChecks(deps.amiTpmSupport, { clock: deps.clock, ...deps.nitroTpmTrust });
    },
    issuer: awsNitroTpmIssuer,
    lookups: ec2Lookups,
  }),
  'aws-sev-snp': snpVariant('aws-sev-snp', '1.3.9900.2.2', ['aws'], async (node, oid) => {
    const { createAwsSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
    return createAwsSevSnpIssuer({
      oid,
      tpm: node.tpm,
      device: await tsm('sev-snp'),
      eventLogPath: LINUX_EVENT_LOG_PATH,
    });
  }),
  'qemu-vtpm': vtpmVariant('qemu-vtpm', {
    oid: '1.3.9900.5.1',
    clouds: ['qemu'],
    checks: (deps) => (deps.qemuAkTrust ? qemuVtpmChecksWith({ akTrust: deps.qemuAkTrust }) : qemuVtpmChecks),
    eventLog: false,
    lookups: qemuAkLookups,
  }),
  'qemu-tdx': tdxVariant(
    'qemu-tdx',
    '1.3.9900.5.99',
    ['qemu'],
    async (_node, oid) => {
      const { QemuTdxIssuer } = await import('../../adapters/attestation/tdx/issuer.js');
      return new QemuTdxIssuer(await tsm('tdx'), oid);
    },
    {
      // TDX measures into MRTD and RTMR0-3 (48 bytes each), not PCRs.
      measurements: Object.fromEntries(
        [0, 1, 2, 3, 4].map((i) => [String(i), { expected: '00'.repeat(48), warnOnly: false }]),
      ),
    },
  ),
};
