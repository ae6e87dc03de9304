/**
 * Fuzz properties of the smaller parsers, most of which read attacker- or operator-supplied input:
 * instance info in attestation documents (aws-nitro-tpm, gcp-sev-es), AK and AMD certificates
 * (vTPM x509-chain: AttestationError; SNP certs: plain Error), TDX collateral (CRL, signed JSON),
 * kubelet CSRs (FileCertificateAuthority.inspectCsr: ConfbootError invalid-argument), node state
 * JSON, the join service's deny list, the cluster KMS URI, the gRPC health request, cloud helpers
 * (OpenStack endpoint, Azure scale-set VM ID, role tags), CLI values (--listen, --at, --rate-limit)
 * and the node configuration (cloud and variant names).
 */
import fc from 'fast-check';
import { loadCertificate, loadCertificates } from '../../../src/adapters/attestation/shared/certs.js';
import { parseCrl } from '../../../src/adapters/attestation/shared/crl.js';
import { parseCertificates } from '../../../src/adapters/attestation/shared/x509-chain.js';
import { parseSignedJson } from '../../../src/adapters/attestation/tdx/collateral.js';
import { parseInstanceIdentity } from '../../../src/adapters/attestation/variants/aws-nitro-tpm.js';
import { parseGceInstanceInfo } from '../../../src/adapters/attestation/variants/gcp-sev-es.js';
import { parseScaleSetVmId } from '../../../src/adapters/cloud/azure/metadata-api.js';
import { parseCustomEndpoint } from '../../../src/adapters/cloud/openstack/metadata-api.js';
import { parseRole as parseTagRole } from '../../../src/adapters/cloud/shared/tags.js';
import { parseDenyList } from '../../../src/adapters/fs/file-deny-list.js';
import { parseClusterKmsUri } from '../../../src/adapters/grpc/kms-uri.js';
import { decodeHealthCheckRequest } from '../../../src/adapters/ops/grpc-health.js';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { decodeNodeState } from '../../../src/adapters/state/json-node-state-store.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { parseAt } from '../../../src/app/cli/attestation-verify-snp.js';
import { parseRateLimit } from '../../../src/app/join-service/settings.js';
import { CSPS, cspFromString, nodeConfig } from '../../../src/app/modules/index.js';
import { UsageError } from '../../../src/app/program/args.js';
import { readHostPort as parseHostPort } from '../../../src/app/program/options.js';
import { fuzzRuns } from '../harness/config.js';
import { edgeJson, FuzzJson, jsonMutated } from '../harness/json.js';
import { type Base, type FuzzBytes, mutated, randomBytes } from '../harness/mutate.js';
import {
  attestationError,
  callDefined,
  callDefinedAsync,
  confbootError,
  type DefinedError,
  ensure,
  property,
} from '../harness/property.js';
import { vector } from '../harness/vectors.js';

/** A plain Error (exactly that class), for parsers documented as "throws". */
const plainError: DefinedError = {
  name: 'Error (plain)',
  test: (err) => err instanceof Error && err.constructor === Error && err.message.length > 0,
};
/**
 * Any Error. For the TDX collateral parsers (parseCrl, parseSignedJson), whose only caller
 * (verifyTdxQuote) turns every exception into a failed check, and for the bufbuild-based health
 * request decoder, documented as "throws on malformed bytes" (a RangeError from the wire reader;
 * grpc-js answers INTERNAL). These properties check "no hang, no non-Error throw".
 */
const anyError: DefinedError = { name: 'any Error', test: (err) => err instanceof Error };
const invalidArgument = confbootError('invalid-argument');
const usage: DefinedError = { name: 'UsageError', test: (err) => err instanceof UsageError };
const noError: DefinedError = { name: 'no error', test: () => false };

// ---- instance info ----

const INSTANCE_INFO = [
  {
    name: 'aws-identity',
    value: { region: 'eu-central-1', imageId: 'ami-0123456789abcdef0', accountId: '1' },
  },
  {
    name: 'gce-info',
    value: {
      zone: 'us-central1-a',
      project_id: 'p-1',
      instance_name: 'n-1',
      project_number: 1,
      instance_id: '42',
    },
  },
];

function checkInstanceInfo(raw: Uint8Array | undefined): void {
  const a = callDefined(() => parseInstanceIdentity(raw), noError);
  if (a.ok && typeof a.value !== 'string') ensure(a.value.imageId.startsWith('ami-'), 'imageId');
  const g = callDefined(() => parseGceInstanceInfo(raw), noError);
  if (g.ok && typeof g.value !== 'string') ensure(g.value.zone !== '', 'zone');
}

// ---- certificates and collateral ----

let certBases: Base[] | undefined;
function certs(): Base[] {
  certBases ??= [
    { name: 'gce-ak-root.cer', bytes: vector('go-tpm-tools/ca-certs/tpm_ek_root_1.cer') },
    { name: 'gce-intermediate.crt', bytes: vector('go-tpm-tools/ca-certs/tpm_ek_intermediate_2.crt') },
    {
      name: 'uca_tpm_ecc_sign_cert.pem',
      bytes: vector('go-tpm-tools/certificates/uca_tpm_ecc_sign_cert.pem'),
    },
    { name: 'vcek.cert', bytes: vector('constellation/snp/vcek.cert') },
    { name: 'certchain.pem', bytes: vector('constellation/snp/certchain.pem') },
    { name: 'rootcrl.der', bytes: vector('go-tdx-guest/testdata/rootcrl.der') },
    { name: 'pckcrl', bytes: vector('go-tdx-guest/testdata/pckcrl') },
  ];
  return certBases;
}

async function checkCertificates(b: Uint8Array): Promise<void> {
  await callDefinedAsync(() => parseCertificates(b, 'ak_cert'), attestationError('ak-certificate'));
  callDefined(() => loadCertificates(b, 'CertChain'), plainError);
  callDefined(() => loadCertificate(b, 'ReportSigner'), plainError);
  await callDefinedAsync(() => parseCrl(b), anyError);
}

let signedJsonBases: Array<{ name: string; value: unknown }> | undefined;
function signedJson() {
  signedJsonBases ??= [
    {
      name: 'sample_tcbInfo_response',
      value: JSON.parse(Buffer.from(vector('go-tdx-guest/testdata/sample_tcbInfo_response')).toString()),
    },
    {
      name: 'sample_qeIdentity_response',
      value: JSON.parse(Buffer.from(vector('go-tdx-guest/testdata/sample_qeIdentity_response')).toString()),
    },
  ];
  return signedJsonBases;
}

// ---- CSR ----

let csrBase: Base[] | undefined;
async function prepareCsr(): Promise<void> {
  csrBase ??= [
    { name: 'kubelet-csr', bytes: (await new X509CsrFactory().create('node-1', ['10.0.0.7'])).csrDer },
  ];
}
const ca = new FileCertificateAuthority({ clock: new SystemClock(), pkiDir: '/nonexistent/fuzz-pki' });

// ---- text inputs ----

const NODE_STATES = [
  {
    name: 'node-state',
    value: { Role: 'ControlPlane', MeasurementSalt: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' },
  },
];
const DENY_LISTS = [
  {
    name: 'deny-list',
    value: { nodes: ['node-1', 'Node_2'], diskUuids: ['0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0'] },
  },
];

const textInput = fc.oneof(
  fc.string({ maxLength: 120 }),
  fc.string({ maxLength: 60, unit: 'grapheme' }),
  fc.json({ maxDepth: 3 }),
  fc.constantFrom('', ' ', 'null', '[]', '{}', '"x"', '1e999', '{"__proto__":{"x":1}}', '\u0000', '\ud800'),
);

function checkText(t: string): void {
  callDefined(() => decodeNodeState(t), invalidArgument);
  callDefined(() => parseDenyList(t), invalidArgument);
  callDefined(() => parseClusterKmsUri(t), invalidArgument);
  callDefined(() => parseCustomEndpoint(t), noError);
  callDefined(() => parseScaleSetVmId(t), confbootError('internal'));
  callDefined(() => parseTagRole(t), noError);
  callDefined(() => parseAt(t), usage);
  callDefined(() => parseHostPort('listen', t), usage);
  callDefined(() => parseRateLimit(t), usage);
  const csp = callDefined(() => cspFromString(t), invalidArgument);
  if (csp.ok) ensure((CSPS as readonly string[]).includes(csp.value), 'known cloud');
  callDefined(() => nodeConfig({ csp: 'qemu', variant: t, diskDevice: t }), invalidArgument);
}

const kmsUriLike = fc
  .record({
    scheme: fc.constantFrom('kms', 'KMS', 'http', ''),
    host: fc.constantFrom('cluster-kms', 'CLUSTER-KMS', 'other', '', 'user:pw@cluster-kms', 'cluster-kms:1'),
    path: fc.constantFrom('', '/', '/x'),
    params: fc.array(
      fc.tuple(
        fc.constantFrom('key', 'salt', 'x', 'KEY', ''),
        fc.oneof(fc.base64String({ maxLength: 60 }), fc.string({ maxLength: 10 })),
      ),
      { maxLength: 4 },
    ),
  })
  .map(
    ({ scheme, host, path, params }) =>
      `${scheme}://${host}${path}?${params.map(([k, v]) => `${k}=${v}`).join('&')}`,
  );

/** The misc-parser properties. */
export const properties = {
  instanceInfo: property({
    arbitrary: () =>
      fc.oneof(
        randomBytes(300).map((b) => b.bytes),
        jsonMutated(INSTANCE_INFO, 3).map((j) => j.bytes),
        edgeJson.map((v) => new TextEncoder().encode(JSON.stringify(v))),
        fc.constant(undefined),
      ),
    check: checkInstanceInfo,
    runs: fuzzRuns(400),
  }),
  certificates: property({
    arbitrary: () => fc.oneof(randomBytes(600), mutated(certs(), 3)),
    check: (b: FuzzBytes) => checkCertificates(b.bytes),
    runs: fuzzRuns(300),
    async: true,
  }),
  tdxSignedJson: property({
    arbitrary: () =>
      fc.oneof(
        jsonMutated(signedJson(), 3),
        textInput.map((t) => new FuzzJson(t, JSON.stringify(t))),
      ),
    check: (x: FuzzJson) => {
      const bytes = typeof x.value === 'string' ? new TextEncoder().encode(x.value) : x.bytes;
      callDefined(() => parseSignedJson(bytes, 'tcbInfo'), anyError);
      callDefined(() => parseSignedJson(bytes, 'enclaveIdentity'), anyError);
    },
    runs: fuzzRuns(300),
  }),
  csr: property({
    prepare: prepareCsr,
    arbitrary: () => fc.oneof(randomBytes(400), mutated(csrBase ?? [], 4)),
    check: async (b: FuzzBytes) => {
      const r = await callDefinedAsync(() => ca.inspectCsr(b.bytes), invalidArgument);
      if (r.ok) ensure(typeof r.value.signatureValid === 'boolean', 'signatureValid is a boolean');
    },
    runs: fuzzRuns(300),
    async: true,
  }),
  textParsers: property({
    arbitrary: () =>
      fc.oneof(
        textInput,
        kmsUriLike,
        jsonMutated([...NODE_STATES, ...DENY_LISTS], 3).map((j) => JSON.stringify(j.value) ?? ''),
      ),
    check: checkText,
    runs: fuzzRuns(500),
  }),
  healthRequest: property({
    arbitrary: () => randomBytes(200),
    check: (b: FuzzBytes) => {
      callDefined(() => decodeHealthCheckRequest(b.bytes), anyError);
    },
    runs: fuzzRuns(300),
  }),
};
