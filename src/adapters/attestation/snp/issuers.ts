/**
 * The SEV-SNP Issuers aws-sev-snp, gcp-sev-snp and azure-sev-snp (docs/upstream.md). Where they
 * sit: each is the vTPM issuer (../vtpm/issuer.ts: TPM quote with nonce SHA256(InstanceInfo ‖
 * extraData)) whose InstanceInfo hook supplies upstream's `snp.InstanceInfo` Go JSON
 * `{"ReportSigner","CertChain","AttestationReport","Azure","GCP"}`; the SNP validators
 * (validators.ts) check it on the other side.
 *
 *  - aws-sev-snp: the guest device (ConfidentialGuestDevice: configfs-tsm or /dev/sev-guest) makes
 *    a report with report_data = SHA-512(PKIX DER of the AK); ReportSigner is the VLEK from the
 *    device's certificate table (auxblob), else from a configured file; CertChain the table's ASK
 *    (the ASVK) when present.
 *  - gcp-sev-snp: report_data = extraData zero-padded to 64 bytes; ReportSigner the VCEK and
 *    CertChain the ASK from the certificate table; GCP = the GCE instance info (injected provider,
 *    the metadata-server reader of the gcp module).
 *  - azure-sev-snp: no guest device — Azure's HCL puts its report in vTPM NV index 0x01400001
 *    (read through an injected reader; `tpm2NvReader` of ../azure/nv-reader.ts in production). AttestationReport is
 *    the report plus the IGVM request header (bytes 32–1236, as upstream ships it) and
 *    Azure.RuntimeData the HCL runtime JSON whose keys[0] is the AK at 0x81000003; the VCEK and
 *    chain optionally come from Azure's THIM endpoint (../azure/thim.ts).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ConfidentialGuestDevice } from '../../../ports/confidential-guest-device.js';
import { ConfbootError, messageOf, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { parseTpmtPublic } from '../../tpm/tpm2-public.js';
import { HCL_REPORT_TYPE_SNP, readHclReport } from '../azure/hcl-report.js';
import { type NvIndexReader, readAzureHclReport } from '../azure/nv-reader.js';
import type { SnpSignerCertificates } from '../azure/thim.js';
import { certificatePem } from '../shared/certs.js';
import {
  type InstanceInfoProvider,
  VtpmIssuer,
  type VtpmIssuerBaseOptions,
  type VtpmIssuerOptions,
} from '../vtpm/issuer.js';
import { parseSnpCertTable, type SnpCertTable } from './cert-table.js';
import { parseSnpReport, SNP_REPORT_SIZE, type SnpReport } from './report.js';

/** upstream `snp.InstanceInfo`; certificates are PEM bytes, absent fields encode as `null`. */
export interface SnpInstanceInfo {
  /** PEM of the VCEK or VLEK that signed the report. */
  reportSigner?: Uint8Array;
  /** PEM of the ASK/ASVK (and possibly the ARK, which validators never trust from here). */
  certChain?: Uint8Array;
  /** The SNP report as the platform gave it (Azure: with the IGVM request header). */
  attestationReport: Uint8Array;
  /** azure-sev-snp: the HCL runtime data (MAA is not used, so `MAAToken` is always empty). */
  azure?: { runtimeData: Uint8Array };
  /** gcp-sev-snp: Go JSON of go-tpm-tools' `GCEInstanceInfo`, embedded as is. */
  gcpJson?: Uint8Array;
}

const goBytes = (b: Uint8Array | undefined): string =>
  b === undefined ? 'null' : JSON.stringify(Buffer.from(b).toString('base64'));

/** Encodes {@link SnpInstanceInfo} as Go's encoding/json writes upstream's struct (field order kept). */
export function encodeSnpInstanceInfo(info: SnpInstanceInfo): Uint8Array {
  const azure =
    info.azure === undefined ? 'null' : `{"RuntimeData":${goBytes(info.azure.runtimeData)},"MAAToken":""}`;
  const gcp = info.gcpJson === undefined ? 'null' : Buffer.from(info.gcpJson).toString('utf8').trim();
  return new TextEncoder().encode(
    `{"ReportSigner":${goBytes(info.reportSigner)},"CertChain":${goBytes(info.certChain)},` +
      `"AttestationReport":${goBytes(info.attestationReport)},"Azure":${azure},"GCP":${gcp}}`,
  );
}

async function readCertificateFile(path: string, what: string): Promise<Uint8Array> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw wrapError(`reading the ${what} from ${path}`, err, 'failed-precondition');
  }
  return certificatePem(bytes, `${what} file ${path}`);
}

/** What the guest device returned, checked: the parsed report and the certificate table. */
interface SnpEvidence {
  report: Uint8Array;
  parsed: SnpReport;
  table: SnpCertTable | undefined;
}

/** Asks the device for a report over `reportData` and checks it is a report over exactly that. */
async function snpEvidence(
  device: ConfidentialGuestDevice,
  reportData: Uint8Array,
  options?: CallOptions,
): Promise<SnpEvidence> {
  const { report, auxBlob } = await device.getReport(reportData, options);
  let parsed: SnpReport;
  try {
    parsed = parseSnpReport(report);
  } catch (err) {
    throw new ConfbootError('internal', `the SEV-SNP device returned no valid report: ${messageOf(err)}`, {
      cause: err,
    });
  }
  if (!Buffer.from(parsed.reportData).equals(Buffer.from(reportData)))
    throw new ConfbootError(
      'internal',
      'the SEV-SNP device returned a report over other report data than requested (a stale or foreign report)',
    );
  let table: SnpCertTable | undefined;
  if (auxBlob !== undefined && auxBlob.length > 0) {
    try {
      table = parseSnpCertTable(auxBlob);
    } catch (err) {
      throw wrapError("reading the SEV-SNP device's certificate table", err, 'internal');
    }
  }
  return { report, parsed, table };
}

/** Where a signer certificate comes from when the device's certificate table has none. */
export interface SnpCertificateFallback {
  /** File with the report signer (aws-sev-snp: the VLEK; gcp-sev-snp: the VCEK), PEM or DER. */
  signerCertificatePath?: string;
}

/**
 * ReportSigner and CertChain for a report: the signer its SIGNING_KEY field names, from the table
 * or the fallback file (a VLEK is required; without a VCEK the validator fetches it from AMD KDS),
 * and the table's ASK.
 */
async function signerAndChain(
  variant: string,
  evidence: SnpEvidence,
  fallback: SnpCertificateFallback,
): Promise<Pick<SnpInstanceInfo, 'reportSigner' | 'certChain'>> {
  const kind = evidence.parsed.signerInfo.signingKey;
  if (kind !== 'vcek' && kind !== 'vlek')
    throw new ConfbootError(
      'failed-precondition',
      `the SEV-SNP report names signing key ${kind}; ${variant} needs a VCEK- or VLEK-signed report`,
    );
  const name = kind.toUpperCase();
  let reportSigner: Uint8Array | undefined;
  const fromTable = evidence.table?.[kind];
  if (fromTable !== undefined) reportSigner = certificatePem(fromTable, `the certificate table's ${name}`);
  else if (fallback.signerCertificatePath !== undefined)
    reportSigner = await readCertificateFile(fallback.signerCertificatePath, name);
  else if (kind === 'vlek')
    throw new ConfbootError(
      'failed-precondition',
      `the report is VLEK-signed, but the device's certificate table holds no VLEK and no VLEK file is configured`,
    );
  const ask = evidence.table?.ask;
  const certChain = ask === undefined ? undefined : certificatePem(ask, "the certificate table's ASK");
  return {
    ...(reportSigner ? { reportSigner } : {}),
    ...(certChain ? { certChain } : {}),
  };
}

function requireSnpDevice(device: ConfidentialGuestDevice, variant: string): void {
  if (device.kind !== 'sev-snp')
    throw new ConfbootError(
      'invalid-argument',
      `${variant} issuer needs an SEV-SNP device, got ${device.kind}`,
    );
}

/** What the aws-sev-snp InstanceInfo needs. */
export interface AwsSevSnpInstanceInfoOptions extends SnpCertificateFallback {
  /** The TPM whose AK the report binds (the same TPM that quotes). */
  tpm: Pick<VtpmIssuerOptions['tpm'], 'attestationKeyPublic'>;
  /** The SEV-SNP guest device. */
  device: ConfidentialGuestDevice;
}

/** The aws-sev-snp InstanceInfo hook: a report over SHA-512(PKIX DER of the AK), signed by the VLEK. */
export function awsSevSnpInstanceInfo(options: AwsSevSnpInstanceInfoOptions): InstanceInfoProvider {
  requireSnpDevice(options.device, 'aws-sev-snp');
  return async (_extraData, call) => {
    try {
      const ak = parseTpmtPublic(await options.tpm.attestationKeyPublic(call));
      const reportData = new Uint8Array(
        createHash('sha512')
          .update(ak.publicKey.export({ type: 'spki', format: 'der' }))
          .digest(),
      );
      const evidence = await snpEvidence(options.device, reportData, call);
      const certs = await signerAndChain('aws-sev-snp', evidence, options);
      return encodeSnpInstanceInfo({ ...certs, attestationReport: evidence.report });
    } catch (err) {
      throw wrapError('getting the aws-sev-snp instance info', err);
    }
  };
}

/** What the gcp-sev-snp InstanceInfo needs. */
export interface GcpSevSnpInstanceInfoOptions extends SnpCertificateFallback {
  /** The SEV-SNP guest device. */
  device: ConfidentialGuestDevice;
  /**
   * Go JSON of go-tpm-tools' `GCEInstanceInfo` (`{"zone","project_id","instance_name"}`), e.g. the
   * gcp module's metadata-server reader.
   */
  gceInstance: (options?: CallOptions) => Promise<Uint8Array>;
}

/** Checks the GCE instance JSON: one object with the string fields the validator looks up. */
function checkGceInstanceJson(json: Uint8Array): Uint8Array {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(json).toString('utf8'));
  } catch (err) {
    throw new ConfbootError('internal', `GCE instance info is not JSON: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const o = parsed as Record<string, unknown> | null;
  if (typeof o !== 'object' || o === null || Array.isArray(o))
    throw new ConfbootError('internal', 'GCE instance info is not a JSON object');
  for (const field of ['zone', 'project_id', 'instance_name'])
    if (typeof o[field] !== 'string' || o[field] === '')
      throw new ConfbootError('internal', `GCE instance info has no ${field}`);
  return json;
}

/** The gcp-sev-snp InstanceInfo hook: a report over extraData (zero-padded), VCEK and ASK, GCE instance. */
export function gcpSevSnpInstanceInfo(options: GcpSevSnpInstanceInfoOptions): InstanceInfoProvider {
  requireSnpDevice(options.device, 'gcp-sev-snp');
  return async (extraData, call) => {
    try {
      if (extraData.length > 64)
        throw new ConfbootError('invalid-argument', `extraData is ${extraData.length} bytes, at most 64 fit`);
      const reportData = new Uint8Array(64);
      reportData.set(extraData);
      const [gcpJson, evidence] = await Promise.all([
        options.gceInstance(call).then(checkGceInstanceJson),
        snpEvidence(options.device, reportData, call),
      ]);
      const certs = await signerAndChain('gcp-sev-snp', evidence, options);
      return encodeSnpInstanceInfo({ ...certs, attestationReport: evidence.report, gcpJson });
    } catch (err) {
      throw wrapError('getting the gcp-sev-snp instance info', err);
    }
  };
}

/**
 * Parses Azure's HCL report of an SEV-SNP CVM ({@link readHclReport}, report type 2 = SNP) and
 * checks that the SNP report at its start parses.
 */
export function parseAzureSnpHclReport(input: Uint8Array): AzureSnpHclReport {
  const hcl = readHclReport(input, HCL_REPORT_TYPE_SNP, { requireMagic: true });
  parseSnpReport(hcl.body.subarray(0, SNP_REPORT_SIZE));
  return { attestationReport: hcl.body, runtimeData: hcl.runtimeData };
}

/** The parts of an Azure SEV-SNP HCL report that azure-sev-snp ships. */
export interface AzureSnpHclReport {
  /** Bytes 32–1236: the SNP report and the IGVM request header (what upstream sends). */
  attestationReport: Uint8Array;
  /** The HCL runtime data (JSON; keys[0] is the AK), exactly its declared size. */
  runtimeData: Uint8Array;
}

/** What the azure-sev-snp InstanceInfo needs. */
export interface AzureSevSnpInstanceInfoOptions {
  /** Reads vTPM NV indices (`tpm2NvReader` in production). */
  readNvIndex: NvIndexReader;
  /**
   * The VCEK and its chain (e.g. `fetchAzureThimCertificates`); default none, and the
   * validator fetches the VCEK from AMD KDS by chip ID and TCB.
   */
  certificates?: (options?: CallOptions) => Promise<SnpSignerCertificates>;
}

/** The azure-sev-snp InstanceInfo hook: the HCL report and runtime data from NV, VCEK optional. */
export function azureSevSnpInstanceInfo(options: AzureSevSnpInstanceInfoOptions): InstanceInfoProvider {
  return async (_extraData, call) => {
    try {
      const hcl = await readAzureHclReport(options.readNvIndex, parseAzureSnpHclReport, call);
      const certs = options.certificates ? await options.certificates(call) : {};
      return encodeSnpInstanceInfo({
        ...(certs.reportSigner ? { reportSigner: certificatePem(certs.reportSigner, 'the VCEK') } : {}),
        ...(certs.certChain ? { certChain: certs.certChain } : {}),
        attestationReport: hcl.attestationReport,
        azure: { runtimeData: hcl.runtimeData },
      });
    } catch (err) {
      throw wrapError('getting the azure-sev-snp instance info', err);
    }
  };
}

/** The vTPM issuer options every SNP issuer passes through (TPM, event log, PCRs, SHA-1 bank). */
export type SnpVtpmOptions = VtpmIssuerBaseOptions;

/** Builds the aws-sev-snp Issuer: vTPM quote + report over SHA-512(AK) + VLEK. */
export function createAwsSevSnpIssuer(
  options: SnpVtpmOptions & Omit<AwsSevSnpInstanceInfoOptions, 'tpm'>,
): VtpmIssuer {
  const { device, signerCertificatePath, ...vtpm } = options;
  return new VtpmIssuer({
    ...vtpm,
    variant: 'aws-sev-snp',
    instanceInfo: awsSevSnpInstanceInfo({
      tpm: options.tpm,
      device,
      ...(signerCertificatePath === undefined ? {} : { signerCertificatePath }),
    }),
  });
}

/** Builds the gcp-sev-snp Issuer: vTPM quote + report over extraData + VCEK/ASK + GCE instance. */
export function createGcpSevSnpIssuer(options: SnpVtpmOptions & GcpSevSnpInstanceInfoOptions): VtpmIssuer {
  const { device, gceInstance, signerCertificatePath, ...vtpm } = options;
  return new VtpmIssuer({
    ...vtpm,
    variant: 'gcp-sev-snp',
    instanceInfo: gcpSevSnpInstanceInfo({
      device,
      gceInstance,
      ...(signerCertificatePath === undefined ? {} : { signerCertificatePath }),
    }),
  });
}

/**
 * Builds the azure-sev-snp Issuer: vTPM quote by the HCL's AK (pass a TPM on
 * `AZURE_HCL_AK_HANDLE` that does not create keys) + the HCL report from NV.
 */
export function createAzureSevSnpIssuer(
  options: SnpVtpmOptions & AzureSevSnpInstanceInfoOptions,
): VtpmIssuer {
  const { readNvIndex, certificates, ...vtpm } = options;
  return new VtpmIssuer({
    ...vtpm,
    variant: 'azure-sev-snp',
    instanceInfo: azureSevSnpInstanceInfo({ readNvIndex, ...(certificates ? { certificates } : {}) }),
  });
}
