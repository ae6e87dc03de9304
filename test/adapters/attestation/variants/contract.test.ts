/**
 * The attestation contract (test/contract/attestation.ts) for the three cloud vTPM variants. Each
 * issuer is the production one — the vTPM issuer with its cloud module's instance-info reader — on
 * a REAL swtpm, and each validator is the one createValidator builds:
 *  - aws-nitro-tpm: the instance identity document read through a FAKE IMDSv2 (loopback HTTP:
 *    session token, then the document); AWS's NitroTPM document from a FAKE Nitro system and PKI
 *    (test/support/fake-nitro-pki.ts, its root pinned), over the swtpm's SHA-384 PCRs; the AMI
 *    lookup is a FAKE EC2 (in-process AmiTpmSupport);
 *  - gcp-sev-es: the REAL event log of a GCE COS-85 AMD SEV VM (../shared/testvectors) measured
 *    into the swtpm event by event with tpm2_pcrextend, so the quote's PCRs replay from it and the
 *    CVM check reads AMD_SEV from it; instance info through a FAKE GCE metadata server; the
 *    shielded identity a FAKE lookup naming the swtpm's AK;
 *  - azure-trustedlaunch: a SYNTHETIC AK certificate (@peculiar/x509, CA Issuers URL on a FAKE
 *    loopback server) in the swtpm's NV index 0x01c101d0, read with the real tpm2_nvread reader.
 * One swtpm serves all three (the tests of a file run one at a time). Tampering flips bytes the
 * quote covers (shared with the other vTPM contracts) and the instance info, which the TPM nonce
 * binds. Each foreign validator is the same variant with other trust: an EC2 that knows no such
 * AMI, a GCE identity naming another key, another AK root.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { randomBytes, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tpm2NvReader } from '../../../../src/adapters/attestation/azure/nv-reader.js';
import {
  AZURE_AK_CERT_NV_INDEX,
  azureTrustedLaunchInfo,
} from '../../../../src/adapters/attestation/azure/trusted-launch-info.js';
import {
  EventType,
  parseEventLog,
  replayEventLog,
} from '../../../../src/adapters/attestation/eventlog/tcg-log.js';
import type { VtpmDocument } from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { createAwsNitroTpmIssuer } from '../../../../src/adapters/attestation/variants/aws-nitro-tpm.js';
import { VtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { awsInstanceIdentity } from '../../../../src/adapters/cloud/aws/instance-identity.js';
import { gceInstanceInfo } from '../../../../src/adapters/cloud/gcp/instance-info.js';
import { type SwtpmInstance, startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import type { AmiTpmSupport } from '../../../../src/ports/ami-tpm-support.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import type { GceShieldedIdentity } from '../../../../src/ports/gce-shielded-identity.js';
import {
  type AttestationPair,
  type AttestationSeed,
  describeAttestationContract,
  flipByteAt,
} from '../../../contract/attestation.js';
import type { ContractSubject } from '../../../contract/harness.js';
import { writeNvIndex } from '../../../support/azure-hcl.js';
import {
  createFakeNitroPki,
  type FakeNitroPki,
  FakeNitroTpmAttestor,
} from '../../../support/fake-nitro-pki.js';
import { SHA256, SoftTpm } from '../../../support/soft-tpm.js';
import { editVtpmDocument, vtpmQuoteTampers } from '../vtpm/tampers.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type Subject = ContractSubject<AttestationPair, AttestationSeed, { concurrentValidation: boolean }>;

const run = promisify(execFile);
const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors');
const GCE_LOG_PATH = resolve(vectors, 'go-tpm-tools/eventlogs/cos-85-amd-sev.bin');
const supports = { concurrentValidation: true };
const noCleanup = async () => {};
/** TPMT_PUBLIC of a key no TPM here holds. */
const otherAk = SoftTpm.create().akPublic;

// --- FAKE cloud endpoints: AWS IMDSv2, GCE metadata, Azure's CA Issuers URL (loopback HTTP). ---

const AWS_IDENTITY = {
  accountId: '123456789012',
  imageId: 'ami-0123456789abcdef0',
  instanceId: 'i-0123456789abcdef0',
  region: 'eu-central-1',
};
const GCE_INSTANCE = { project: 'confboot-test', zone: 'europe-west3-a', name: 'worker-0' };
const IMDS_TOKEN = 'fake-imdsv2-token';
const CA_PATH = '/azure/ak-ca.crt';

let server: Server;
let baseUrl = '';
/** Requests the fake did not expect (answered 400); must stay empty. */
const unexpected: string[] = [];
let caDer: Uint8Array = new Uint8Array();

function route(
  method: string,
  path: string,
  header: (h: string) => string | undefined,
): Buffer | string | undefined {
  if (method === 'PUT' && path === '/latest/api/token' && header('x-aws-ec2-metadata-token-ttl-seconds'))
    return IMDS_TOKEN;
  if (
    path === '/latest/dynamic/instance-identity/document' &&
    header('x-aws-ec2-metadata-token') === IMDS_TOKEN
  )
    return JSON.stringify(AWS_IDENTITY, null, 2);
  if (method === 'GET' && header('metadata-flavor') === 'Google') {
    if (path === '/computeMetadata/v1/project/project-id') return GCE_INSTANCE.project;
    if (path === '/computeMetadata/v1/instance/zone') return `projects/1234/zones/${GCE_INSTANCE.zone}`;
    if (path === '/computeMetadata/v1/instance/name') return GCE_INSTANCE.name;
  }
  if (method === 'GET' && path === CA_PATH) return Buffer.from(caDer);
  return undefined;
}

function startFakeCloud(): Promise<Server> {
  const s = createServer((req, res) => {
    const body = route(req.method ?? '', req.url ?? '', (h) => req.headers[h] as string | undefined);
    if (body === undefined) {
      unexpected.push(`${req.method} ${req.url}`);
      res.writeHead(400).end('unexpected request');
      return;
    }
    res.writeHead(200).end(body);
  });
  return new Promise((ok) => s.listen(0, '127.0.0.1', () => ok(s)));
}

// --- One REAL swtpm, its PCRs measured from the REAL GCE event log. ---

let swtpm: SwtpmInstance;
let tpm: Tpm2ToolsTpm;
let akPem = '';
let policy: MeasurementsPolicy;
let nitroPki: FakeNitroPki;

/** Extends every measured event of `log` into the swtpm's SHA-256 bank, in order. */
async function measureEventLog(tcti: string, log: Uint8Array): Promise<void> {
  const env = { ...process.env, TPM2TOOLS_TCTI: tcti };
  for (const e of parseEventLog(log).events) {
    if (e.type === EventType.EV_NO_ACTION) continue;
    const digest = Buffer.from(e.digests.get(SHA256) as Uint8Array).toString('hex');
    await run('tpm2_pcrextend', [`${e.pcr}:sha256=${digest}`], { env, timeout: 10_000 });
  }
}

beforeAll(async () => {
  server = await startFakeCloud();
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  swtpm = await startSwtpm();
  tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  nitroPki = await createFakeNitroPki();
  akPem = parseTpmtPublic(await tpm.attestationKeyPublic())
    .publicKey.export({ type: 'spki', format: 'pem' })
    .toString();
  const log = readFileSync(GCE_LOG_PATH);
  await measureEventLog(swtpm.tcti, log);
  const pcrs = await tpm.readPcrs(Array.from({ length: 24 }, (_, i) => i));
  // The swtpm now holds exactly what the log replays to (else every GCE case would fail obscurely).
  for (const [i, v] of replayEventLog(parseEventLog(log)).get(SHA256) ?? [])
    if (!Buffer.from(pcrs.get(i) as Uint8Array).equals(Buffer.from(v)))
      throw new Error(`test: swtpm PCR${i} does not match the replayed GCE event log`);
  policy = new MeasurementsPolicy(
    new Map([...pcrs].map(([i, v]) => [i, { expected: Buffer.from(v), warnOnly: false }] as const)),
  );
}, 60_000);
afterAll(async () => {
  await swtpm?.stop();
  await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
});

// --- Tampering: the TPM half, and the instance info the TPM nonce binds. ---

/** Edits the InstanceInfo bytes of a vTPM document. */
function editInstanceInfo(doc: Uint8Array, f: (info: Uint8Array) => Uint8Array): Uint8Array {
  return editVtpmDocument(doc, (d: VtpmDocument) => {
    d.instanceInfo = f(d.instanceInfo ?? new Uint8Array());
  });
}

/** Replaces `from` by `to` (same length) in the InstanceInfo text. */
function swapInInfo(doc: Uint8Array, from: string, to: string): Uint8Array {
  return editInstanceInfo(doc, (info) => {
    const text = Buffer.from(info).toString('utf8');
    if (!text.includes(from) || from.length !== to.length) throw new Error(`test: cannot swap ${from}`);
    return new TextEncoder().encode(text.replace(from, to));
  });
}

function tampers(doc: Uint8Array, infoSwap: [string, string]) {
  return [
    ...vtpmQuoteTampers(doc, otherAk),
    { what: `InstanceInfo ${infoSwap[0]} -> ${infoSwap[1]}`, document: swapInInfo(doc, ...infoSwap) },
    { what: 'InstanceInfo byte 0', document: editInstanceInfo(doc, (info) => flipByteAt(info, 0)) },
  ];
}

// --- aws-nitro-tpm ---

/** FAKE EC2: AMIs and their TpmSupport; an unknown AMI is what EC2 reports for a foreign one. */
function fakeEc2(images: Record<string, string | undefined>): AmiTpmSupport {
  return {
    async tpmSupport(region, imageId) {
      if (region !== AWS_IDENTITY.region || !(imageId in images))
        throw new ConfbootError('permission-denied', `FAKE EC2: no image ${imageId} in ${region}`);
      return images[imageId];
    },
  };
}

/** The validator's trust in the FAKE Nitro PKI, at a time its certificates are valid. */
const nitroTrust = () => ({
  nitroTpmTrust: { rootSha256: [nitroPki.rootSha256] },
  clock: { now: () => nitroPki.validAt },
});

const awsPair = (): AttestationPair => ({
  issuer: createAwsNitroTpmIssuer({
    oid: variantOid('aws-nitro-tpm'),
    tpm,
    instanceIdentity: (options) => awsInstanceIdentity(baseUrl, options),
    nitroTpm: new FakeNitroTpmAttestor(
      nitroPki,
      async (options) => (await tpm.quoteBank('sha384', randomBytes(32), undefined, options)).pcrs,
    ),
  }),
  validator: createValidator('aws-nitro-tpm', {
    policy,
    ...nitroTrust(),
    amiTpmSupport: fakeEc2({ [AWS_IDENTITY.imageId]: 'v2.0', 'ami-0123456789abcdef1': 'v2.0' }),
  }),
});

describeAttestationContract(
  'aws-nitro-tpm (REAL swtpm, FAKE IMDSv2 over loopback HTTP, FAKE EC2)',
  async (): Promise<Subject> => ({
    subject: awsPair(),
    seed: {
      // Another AMI that also supports NitroTPM: only the TPM nonce tells the copies apart.
      tamper: (doc) => tampers(doc, ['ami-0123456789abcdef0', 'ami-0123456789abcdef1']),
      foreignValidator: createValidator('aws-nitro-tpm', {
        policy,
        ...nitroTrust(),
        amiTpmSupport: fakeEc2({}),
      }),
    },
    cleanup: noCleanup,
    supports,
  }),
);

// --- gcp-sev-es ---

/**
 * FAKE GCE shielded-identity lookup: `pem` for this VM and for `worker-1` (a second VM with the same
 * AK, so only the TPM nonce tells their documents apart), nothing for others.
 */
function fakeGce(pem: () => string): GceShieldedIdentity {
  return {
    async signingKeyPem(project, zone, instance) {
      const known = instance === GCE_INSTANCE.name || instance === 'worker-1';
      if (project !== GCE_INSTANCE.project || zone !== GCE_INSTANCE.zone || !known)
        throw new ConfbootError('permission-denied', `FAKE GCE: no instance ${project}/${zone}/${instance}`);
      return pem();
    },
  };
}

const gcpPair = (): AttestationPair => ({
  issuer: new VtpmIssuer({
    variant: 'gcp-sev-es',
    oid: variantOid('gcp-sev-es'),
    tpm,
    eventLogPath: GCE_LOG_PATH,
    instanceInfo: (_extraData, options) => gceInstanceInfo(`${baseUrl}/computeMetadata/v1`, options),
  }),
  validator: createValidator('gcp-sev-es', { policy, gceShieldedIdentity: fakeGce(() => akPem) }),
});

describeAttestationContract(
  'gcp-sev-es (REAL swtpm measured from a REAL GCE AMD SEV event log, FAKE GCE metadata server and API)',
  async (): Promise<Subject> => ({
    subject: gcpPair(),
    seed: {
      // Another instance the fake GCE vouches for with the same AK: only the TPM nonce refuses it.
      tamper: (doc) => tampers(doc, ['worker-0', 'worker-1']),
      foreignValidator: createValidator('gcp-sev-es', {
        policy,
        gceShieldedIdentity: fakeGce(() => SoftTpm.create().akPublicKeyPem()),
      }),
    },
    cleanup: noCleanup,
    supports,
  }),
);

// --- azure-trustedlaunch ---

const RSA = {
  name: 'RSASSA-PKCS1-v1_5',
  hash: 'SHA-256',
  publicExponent: new Uint8Array([1, 0, 1]),
  modulusLength: 2048,
};
const VALIDITY = { notBefore: new Date('2025-01-01T00:00:00Z'), notAfter: new Date('2030-01-01T00:00:00Z') };
const NOW = new Date('2026-06-01T00:00:00Z');

async function selfSignedRoot(name: string) {
  const keys = await webcrypto.subtle.generateKey(RSA, false, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name,
    keys,
    signingAlgorithm: RSA,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
    ...VALIDITY,
  });
  return { keys, cert };
}

describe('azure-trustedlaunch: SYNTHETIC AK certificate in the swtpm NV, CA from a FAKE CA Issuers URL', () => {
  let rootPem = '';
  let otherRootPem = '';
  beforeAll(async () => {
    const root = await selfSignedRoot('CN=Test Azure AK Root');
    const other = await selfSignedRoot('CN=Other AK Root');
    const caKeys = await webcrypto.subtle.generateKey(RSA, false, ['sign', 'verify']);
    const ca = await x509.X509CertificateGenerator.create({
      serialNumber: '02',
      subject: 'CN=Test Azure VM AK CA',
      issuer: root.cert.subject,
      publicKey: caKeys.publicKey,
      signingKey: root.keys.privateKey,
      signingAlgorithm: RSA,
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
      ...VALIDITY,
    });
    const ak = await webcrypto.subtle.importKey(
      'spki',
      parseTpmtPublic(await tpm.attestationKeyPublic()).publicKey.export({ type: 'spki', format: 'der' }),
      RSA,
      true,
      ['verify'],
    );
    const akCert = await x509.X509CertificateGenerator.create({
      serialNumber: '03',
      subject: 'CN=vm-ak',
      issuer: ca.subject,
      publicKey: ak,
      signingKey: caKeys.privateKey,
      signingAlgorithm: RSA,
      extensions: [new x509.AuthorityInfoAccessExtension({ caIssuers: `${baseUrl}${CA_PATH}` })],
      ...VALIDITY,
    });
    caDer = new Uint8Array(ca.rawData);
    await writeNvIndex(swtpm.tcti, AZURE_AK_CERT_NV_INDEX, new Uint8Array(akCert.rawData));
    rootPem = root.cert.toString('pem');
    otherRootPem = other.cert.toString('pem');
  }, 30_000);

  const validator = (root: () => string) =>
    createValidator('azure-trustedlaunch', { policy, azureAkRoots: [root()], clock: { now: () => NOW } });
  const issuer = () =>
    new VtpmIssuer({
      variant: 'azure-trustedlaunch',
      oid: variantOid('azure-trustedlaunch'),
      tpm,
      instanceInfo: (_extraData, options) =>
        azureTrustedLaunchInfo(tpm2NvReader({ tcti: swtpm.tcti }), options),
    });

  it('the validator chained the AK certificate from NV (CA fetched over HTTP) to the root', async () => {
    const checks = await checksOf({ issuer: issuer(), validator: validator(() => rootPem) });
    expect(checks.get('ak-certificate')).toMatch(
      /^ok: AK certificate "CN=vm-ak" chains to a configured root at 2026-06-01/,
    );
    expect(checks.get('ak-trust')).toBe('ok: attestation key equals the AK certificate key');
  });

  describeAttestationContract(
    'azure-trustedlaunch (REAL swtpm and tpm2_nvread, SYNTHETIC AK chain, FAKE CA Issuers server)',
    async (): Promise<Subject> => ({
      subject: { issuer: issuer(), validator: validator(() => rootPem) },
      seed: {
        tamper: (doc) => [
          ...vtpmQuoteTampers(doc, otherAk),
          {
            what: 'InstanceInfo byte 0',
            document: editInstanceInfo(doc, (info) => flipByteAt(info, 0)),
          },
          {
            what: 'AkCert signature (last byte)',
            document: editInstanceInfo(doc, (info) => {
              const o = JSON.parse(Buffer.from(info).toString('utf8')) as { AkCert: string; CA: string };
              const der = Buffer.from(o.AkCert, 'base64');
              o.AkCert = Buffer.from(flipByteAt(der, der.length - 1)).toString('base64');
              return new TextEncoder().encode(JSON.stringify(o));
            }),
          },
        ],
        foreignValidator: validator(() => otherRootPem),
      },
      cleanup: noCleanup,
      supports,
    }),
  );
});

/** The checks of one honest validation, by name. */
async function checksOf(pair: AttestationPair): Promise<Map<string, string>> {
  const nonce = randomBytes(32);
  const res = await pair.validator.validate(await pair.issuer.issue(randomBytes(32), nonce), nonce);
  return new Map(res.checks.map((c) => [c.name, `${c.ok ? 'ok' : 'FAILED'}: ${c.detail ?? ''}`]));
}

// The contract asks only that every check passes; these make sure the variant checks really ran.
describe('what the cloud vTPM validators checked', () => {
  it('aws-nitro-tpm verified the FAKE Nitro document, its AK and SHA-384 PCRs, and asked the FAKE EC2 about the AMI', async () => {
    const checks = await checksOf(awsPair());
    expect(checks.get('ak-trust')).toMatch(/^ok: attestation key is the public_key AWS signed/);
    expect(checks.get('nitrotpm-pcrs')).toMatch(/^ok: 24 quoted SHA-384 PCRs equal/);
    expect(checks.get('cvm')).toMatch(/^ok: AMI ami-0123456789abcdef0 in eu-central-1 has TpmSupport v2.0/);
  });
  it('gcp-sev-es replayed the REAL event log to the quoted PCRs and read AMD_SEV from it', async () => {
    const checks = await checksOf(gcpPair());
    expect(checks.get('event-log')).toMatch(/^ok: crypto-agile log, \d+ events, replays/);
    expect(checks.get('cvm')).toMatch(/^ok: GCE firmware v\d+, AMD_SEV/);
    expect(checks.get('ak-trust')).toMatch(
      /^ok: .*shielded-identity signing key of confboot-test\/europe-west3-a\/worker-0/,
    );
  });
  it('the fake cloud endpoints saw no request they did not expect', () => {
    expect(unexpected).toEqual([]);
  });
});
