/**
 * Fuzz properties of three small parsers (run in the fuzz worker by ../ak-template-hcl-pcs.test.ts):
 *  - `parseAkTemplate` (src/adapters/tpm/nv-template-ak.ts), the TPMT_PUBLIC key template GCE keeps
 *    in TPM NV memory, seeded with GCE-style RSA and ECC AK templates marshalled by hand as
 *    test/adapters/tpm/nv-template-ak.test.ts builds them. It returns a template whose fields are
 *    the input's bytes, or throws ConfbootError `failed-precondition`.
 *  - `parseAzureHclReport` (TDX, src/adapters/attestation/azure/hcl-report.ts) and
 *    `parseAzureSnpHclReport` (SEV-SNP, src/adapters/attestation/snp/issuers.ts), seeded with
 *    SIMULATED HCL reports (test/support/azure-hcl.ts around a simulated TDREPORT and the real SNP
 *    report vector) and the real Azure TDX HCL report. They document plain `Error`s, so a defined
 *    error is an Error whose class is exactly Error; a result must stay within the report.
 *  - `parseTdxCollateralSource` (src/adapters/attestation/tdx/config.ts), the `--tdx-collateral`
 *    value: a directory, or Intel PCS at an http(s) URL without query or fragment, which the PCS
 *    client then accepts too; anything else is ConfbootError `invalid-argument`.
 * Every input is also passed at a non-zero byteOffset of a larger buffer, so DataView and subarray
 * offsets are exercised.
 */
import fc from 'fast-check';
import { parseAzureHclReport } from '../../../src/adapters/attestation/azure/hcl-report.js';
import { parseAzureSnpHclReport } from '../../../src/adapters/attestation/snp/issuers.js';
import { parseTdxCollateralSource } from '../../../src/adapters/attestation/tdx/config.js';
import { IntelPcsCollateralSource } from '../../../src/adapters/attestation/tdx/pcs-client.js';
import {
  createPrimaryPlan,
  matchesTemplate,
  parseAkTemplate,
} from '../../../src/adapters/tpm/nv-template-ak.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import { simulatedTdReport } from '../../adapters/attestation/tdx/azure-tdx-simulation.js';
import { eccAkTemplate, rsaAkTemplate } from '../../adapters/tpm/ak-template-fixture.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { buildHclReport } from '../../support/azure-hcl.js';
import { fuzzRuns } from '../harness/config.js';
import { type Base, edgeValue, FuzzBytes, mutated, randomBytes } from '../harness/mutate.js';
import { callDefined, confbootError, type DefinedError, ensure, property } from '../harness/property.js';
import { vector } from '../harness/vectors.js';

/** A plain Error (exactly that class) with a message, as the HCL parsers document. */
const plainError: DefinedError = {
  name: 'Error (plain)',
  test: (err) => err instanceof Error && err.constructor === Error && err.message.length > 0,
};

const failedPrecondition = confbootError('failed-precondition');
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));
const u16be = (b: Uint8Array, o: number) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).readUInt16BE(o);
const u32be = (b: Uint8Array, o: number) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).readUInt32BE(o);
const u32le = (b: Uint8Array, o: number) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).readUInt32LE(o);

/** `arb`'s bytes, sometimes placed at byteOffset 1–7 of a larger buffer (filled with 0xee). */
function atOffset(arb: fc.Arbitrary<FuzzBytes>): fc.Arbitrary<FuzzBytes> {
  return fc.tuple(arb, fc.nat({ max: 7 })).map(([b, off]) => {
    if (off === 0) return b;
    const backing = new Uint8Array(off + b.bytes.length + 5).fill(0xee);
    backing.set(b.bytes, off);
    return new FuzzBytes(backing.subarray(off, off + b.bytes.length), `${b.recipe} at byteOffset ${off}`);
  });
}

// ---- AK templates ----

const TPM_ALG_RSA = 0x0001;
const TPM_ALG_ECC = 0x0023;
const rsaTemplate = (unique = new Uint8Array(0), policy = new Uint8Array(0)) =>
  new Uint8Array(rsaAkTemplate({ unique, policy }));
const eccTemplate = () => new Uint8Array(eccAkTemplate());

/** The valid AK templates the mutations start from (each must parse: checked by the test file). */
export function akTemplateSeeds(): Base[] {
  return [
    { name: 'gce-rsa-ak-template', bytes: rsaTemplate() },
    {
      name: 'rsa-ak-template(unique 256, policy 32)',
      bytes: rsaTemplate(new Uint8Array(256).fill(0xab), new Uint8Array(32).fill(0x5c)),
    },
    { name: 'gce-ecc-ak-template', bytes: eccTemplate() },
  ];
}

function checkAkTemplate(b: Uint8Array): void {
  const r = callDefined(() => parseAkTemplate(b), failedPrecondition);
  if (!r.ok) return;
  const t = r.value;
  ensure(t.raw === b, 'raw is not the input');
  ensure(t.type === TPM_ALG_RSA || t.type === TPM_ALG_ECC, `type ${t.type} is neither RSA nor ECC`);
  ensure(t.type === u16be(b, 0) && t.nameAlg === u16be(b, 2), 'type/nameAlg differ from the input');
  ensure(t.attributes === u32be(b, 4), 'attributes differ from the input');
  ensure(
    t.authPolicy.length <= 64 &&
      u16be(b, 8) === t.authPolicy.length &&
      same(t.authPolicy, b.subarray(10, 10 + t.authPolicy.length)),
    'authPolicy is not the input bytes after its size',
  );
  ensure(
    Number.isSafeInteger(t.uniqueOffset) && t.uniqueOffset >= 10 && t.uniqueOffset < b.length,
    `uniqueOffset ${t.uniqueOffset} is outside the ${b.length}-byte template`,
  );
  ensure(t.unique.length === (t.type === TPM_ALG_RSA ? 1 : 2), `${t.unique.length} unique fields`);
  let o = t.uniqueOffset;
  for (const u of t.unique) {
    ensure(o + 2 + u.length <= b.length, 'a unique field runs past the template');
    ensure(
      u16be(b, o) === u.length && same(u, b.subarray(o + 2, o + 2 + u.length)),
      'unique is not the input',
    );
    o += 2 + u.length;
  }
  ensure(o === b.length, 'unique does not end the template (trailing bytes accepted)');
  if (t.type === TPM_ALG_RSA) ensure(t.curveId === 0, 'RSA template with a curve');
  else ensure(t.rsaBits === 0 && t.exponent === 0, 'ECC template with RSA parameters');
  ensure(matchesTemplate(b, t), 'the template does not match itself');
  // What the adapter does next with a parsed template: a tpm2_createprimary plan or a refusal.
  const plan = callDefined(() => createPrimaryPlan(t, 'endorsement'), failedPrecondition);
  if (plan.ok) {
    const empty = t.unique.every((u) => u.length === 0);
    ensure((plan.value.uniqueData === undefined) === empty, 'unique data passed iff the template has some');
    ensure((plan.value.policy === undefined) === (t.authPolicy.length === 0), 'policy passed iff set');
  }
}

// ---- HCL reports ----

const RUNTIME_JSON = new TextEncoder().encode(
  JSON.stringify({
    keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: 'AQAB', n: 'x'.repeat(342) }],
    'vm-configuration': { 'secure-boot': true, 'tpm-enabled': true, vmUniqueId: 'fuzz-vm' },
  }),
);
/** Size of an SEV-SNP attestation report (the SNP vector carries 20 more bytes of HCL padding). */
const SNP_REPORT_BYTES = 1184;

let hclSeeds: Base[] | undefined;

/** The valid HCL reports the mutations start from (each parses with its own parser). */
export function hclReportSeeds(): Base[] {
  hclSeeds ??= [
    {
      name: 'simulated-tdx-hcl',
      bytes: buildHclReport(simulatedTdReport(new Uint8Array(64).fill(0x11)), 4, RUNTIME_JSON),
    },
    {
      name: 'simulated-tdx-hcl(no runtime data)',
      bytes: buildHclReport(simulatedTdReport(new Uint8Array(64)), 4, new Uint8Array(0)),
    },
    {
      name: 'simulated-snp-hcl(attestation.bin)',
      bytes: buildHclReport(
        vector('constellation/snp/attestation.bin').subarray(0, SNP_REPORT_BYTES),
        2,
        RUNTIME_JSON,
      ),
    },
    { name: 'azure-tdx/hclreport.bin', bytes: vector('constellation/azure-tdx/hclreport.bin') },
  ];
  return hclSeeds;
}

/**
 * Random reports long enough for the header, with "HCLA" or not, a report type (2, 4 or other) and
 * a runtime-data size near the bounds, so the checks after the length check are reached.
 */
const shapedHcl: fc.Arbitrary<FuzzBytes> = fc
  .record({
    body: fc.uint8Array({ minLength: 1236, maxLength: 1600 }),
    magic: fc.boolean(),
    type: fc.constantFrom(2, 4, 0, 0xffffffff),
    size: fc.oneof(
      fc.constantFrom<number | 'left' | 'left+1'>('left', 'left+1', 0, 1, 0x7fffffff, 0xffffffff),
      edgeValue.map((v) => (typeof v === 'number' ? v : 'left')),
    ),
  })
  .map(({ body, magic, type, size }) => {
    const b = Buffer.from(body);
    if (magic) b.write('HCLA', 0, 'latin1');
    b.writeUInt32LE(type, 1224);
    const left = b.length - 1236;
    const n = size === 'left' ? left : size === 'left+1' ? left + 1 : size;
    b.writeUInt32LE(n >>> 0, 1232);
    const recipe = `hcl(${b.length} random bytes, magic ${magic}, type ${type}, runtime size ${n >>> 0})`;
    return new FuzzBytes(new Uint8Array(b), recipe);
  });

function checkHclReports(b: Uint8Array): void {
  const declared = b.length >= 1236 ? u32le(b, 1232) : -1;
  const tdx = callDefined(() => parseAzureHclReport(b), plainError);
  if (tdx.ok) {
    const h = tdx.value;
    ensure(u32le(b, 1224) === 4, 'a TDX HCL report of another type');
    ensure(
      h.tdReport.length === 1024 && same(h.tdReport, b.subarray(32, 1056)),
      'tdReport is not bytes 32–1056',
    );
    ensure(
      h.runtimeData.length === declared && same(h.runtimeData, b.subarray(1236, 1236 + declared)),
      `runtime data is ${h.runtimeData.length} bytes, declared ${declared}`,
    );
    ensure(h.reportMacType === b[32], 'reportMacType is not the TDREPORT type');
    ensure(
      h.reportData.length === 64 && h.mrTd.length === 48 && h.mrSeam.length === 48 && h.xfam.length === 8,
      'a TDREPORT field has the wrong size',
    );
    ensure(h.rtmrs.length === 4 && h.rtmrs.every((r) => r.length === 48), 'RTMRs have the wrong size');
    ensure(typeof h.hashesConsistent === 'boolean', 'hashesConsistent is not a boolean');
  }
  const snp = callDefined(() => parseAzureSnpHclReport(b), plainError);
  if (snp.ok) {
    const h = snp.value;
    ensure(Buffer.from(b.subarray(0, 4)).toString('latin1') === 'HCLA', 'accepted without "HCLA"');
    ensure(u32le(b, 1224) === 2, 'an SEV-SNP HCL report of another type');
    ensure(
      h.attestationReport.length === 1204 && same(h.attestationReport, b.subarray(32, 1236)),
      'attestation report is not bytes 32–1236',
    );
    ensure(
      h.runtimeData.length === declared && same(h.runtimeData, b.subarray(1236, 1236 + declared)),
      `runtime data is ${h.runtimeData.length} bytes, declared ${declared}`,
    );
  }
}

// ---- --tdx-collateral ----

const INTEL = 'https://api.trustedservices.intel.com';

/** Strings around the `pcs:URL` syntax: edge cases, URLs with queries and fragments, edits of valid values. */
const collateralValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ maxLength: 40, unit: 'binary' }),
  fc.constantFrom(
    'pcs',
    'pcs:',
    'PCS',
    'PCS:https://a',
    'pcs:pcs',
    './pcs',
    ' pcs',
    'pcs ',
    'pcs:http://a/?',
    'pcs:http://a/#',
    'pcs:http://a ',
    'pcs:https://',
    'pcs:http:a',
    'pcs:http:/a',
    'pcs:file:///pcs',
    'pcs:ftp://a/',
    'pcs:HTTPS://A.EXAMPLE/',
    'pcs:http://[::1]:8080/',
    'pcs:http://127.0.0.1:0',
    'pcs:http://a/%zz',
    'pcs:http://a/\u0000',
    'pcs:http://a\nb/',
    'pcs:http://user:pw@a/',
    `pcs:${INTEL}//`,
    `pcs:${INTEL}/?fmspc=1`,
  ),
  fc
    .webUrl({
      validSchemes: ['http', 'https', 'ftp', 'file'],
      withQueryParameters: true,
      withFragments: true,
    })
    .map((u) => `pcs:${u}`),
  fc.string({ maxLength: 30 }).map((s) => `pcs:${s}`),
  fc
    .tuple(
      fc.constantFrom(`pcs:${INTEL}`, 'pcs:http://127.0.0.1:8081/pcs/'),
      fc.nat(),
      fc.string({ maxLength: 3 }),
    )
    .map(([v, at, s]) => {
      const i = at % (v.length + 1);
      return v.slice(0, i) + s + v.slice(i);
    }),
);

const rootCrlValue: fc.Arbitrary<string | undefined> = fc.option(
  fc.oneof(
    fc.string({ maxLength: 30 }),
    fc.webUrl({ validSchemes: ['http', 'https', 'ftp'], withQueryParameters: true, withFragments: true }),
    fc.constantFrom(
      '',
      'http://a/root.der',
      'https://a/root.der?x',
      'https://a/root.der#x',
      'file:///root.der',
    ),
  ),
  { nil: undefined, freq: 2 },
);

function isHttpUrlWithoutQuery(value: string): boolean {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return false;
  }
  return (u.protocol === 'http:' || u.protocol === 'https:') && u.search === '' && u.hash === '';
}

type CollateralInput = [string, string | undefined];

/**
 * ConfbootError(invalid-argument) with a message. The suite's garbage check (no "NaN", no
 * "[object Object]", see confbootError) runs on the message without the echoed inputs, which may
 * well contain either.
 */
function invalidArgumentEchoing(...inputs: Array<string | undefined>): DefinedError {
  return {
    name: 'ConfbootError(invalid-argument)',
    test: (err) => {
      if (!(err instanceof ConfbootError) || err.code !== 'invalid-argument' || err.message === '')
        return false;
      let rest = err.message;
      for (const i of inputs) if (i) rest = rest.split(JSON.stringify(i)).join('').split(i).join('');
      return !/\bNaN\b|\[object Object\]/.test(rest);
    },
  };
}

/** Whether two URLs name the same origin and path (trailing slashes aside): the parser normalises. */
function sameUrl(a: string, b: string): boolean {
  const x = new URL(a);
  const y = new URL(b);
  return x.origin === y.origin && x.pathname.replace(/\/+$/, '') === y.pathname.replace(/\/+$/, '');
}

/** The parsed source, checked for shape; undefined when it was refused with `invalid-argument`. */
function parsedCollateralSource([value, root]: CollateralInput): IntelPcsCollateralSource | undefined {
  const r = callDefined(() => parseTdxCollateralSource(value, root), invalidArgumentEchoing(value, root));
  if (!r.ok) return undefined;
  const s = r.value;
  if (s.kind === 'dir') {
    ensure(s.dir === value && value !== '', 'dir is not the value');
    ensure(value !== 'pcs' && !value.startsWith('pcs:'), 'a pcs value taken as a directory');
    ensure(root === undefined, 'a directory accepted with a root CRL URL');
    return undefined;
  }
  ensure(s.kind === 'pcs', `unknown kind ${String((s as { kind: unknown }).kind)}`);
  ensure(
    sameUrl(s.baseUrl, value === 'pcs' ? INTEL : value.slice('pcs:'.length)),
    'baseUrl is not the value (normalised)',
  );
  ensure(
    isHttpUrlWithoutQuery(s.baseUrl),
    `baseUrl ${JSON.stringify(s.baseUrl)} is not http(s) without query`,
  );
  if (root === undefined) ensure(!('rootCrlUrl' in s), 'a root CRL URL appeared');
  else
    ensure(
      s.rootCrlUrl !== undefined && sameUrl(s.rootCrlUrl, root) && isHttpUrlWithoutQuery(s.rootCrlUrl),
      `rootCrlUrl ${JSON.stringify(s.rootCrlUrl)} is not http(s) without query`,
    );
  // The PCS client accepts what the option parser accepts (no error at service start).
  try {
    return new IntelPcsCollateralSource({
      clock: new FakeClock(),
      baseUrl: s.baseUrl,
      ...(s.rootCrlUrl === undefined ? {} : { rootCrlUrl: s.rootCrlUrl }),
    });
  } catch (err) {
    throw new Error(`IntelPcsCollateralSource refused an accepted source: ${String(err)}`, { cause: err });
  }
}

const FMSPC = '50806f000000';

/**
 * The request URLs the PCS client builds from an accepted base URL parse and keep the PCS path in
 * the path (not in a query or fragment, as a base ending in "?" or "#" would put it).
 */
function checkRequestUrls(input: CollateralInput): void {
  const pcs = parsedCollateralSource(input);
  if (pcs === undefined) return;
  const urls: Array<[string, string, string]> = [
    [pcs.tcbInfoUrl(FMSPC), '/tdx/certification/v4/tcb', `?fmspc=${FMSPC}`],
    [pcs.qeIdentityUrl(), '/tdx/certification/v4/qe/identity', ''],
    [pcs.pckCrlUrl(), '/sgx/certification/v4/pckcrl', '?ca=platform&encoding=der'],
  ];
  for (const [url, path, search] of urls) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new Error(
        `accepted base URL ${JSON.stringify(pcs.baseUrl)} yields the invalid URL ${JSON.stringify(url)}`,
      );
    }
    ensure(
      u.pathname.endsWith(path) && u.search === search && u.hash === '',
      `accepted base URL ${JSON.stringify(pcs.baseUrl)} yields ${JSON.stringify(u.href)}: path ${JSON.stringify(u.pathname)}, query ${JSON.stringify(u.search)}, fragment ${JSON.stringify(u.hash)}`,
    );
  }
}

/** The properties of this module. */
export const properties = {
  akTemplate: property({
    arbitrary: () =>
      atOffset(fc.oneof(randomBytes(96), mutated(akTemplateSeeds(), 4), mutated(akTemplateSeeds(), 1))),
    check: (b: FuzzBytes) => checkAkTemplate(b.bytes),
    runs: fuzzRuns(1500),
  }),
  hclReports: property({
    arbitrary: () =>
      atOffset(
        fc.oneof(randomBytes(1400), shapedHcl, mutated(hclReportSeeds(), 4), mutated(hclReportSeeds(), 1)),
      ),
    check: (b: FuzzBytes) => checkHclReports(b.bytes),
    runs: fuzzRuns(600),
  }),
  tdxCollateralSource: property({
    arbitrary: () => fc.tuple(collateralValue, rootCrlValue),
    check: (input: CollateralInput) => {
      parsedCollateralSource(input);
    },
    runs: fuzzRuns(1500),
  }),
  tdxCollateralRequestUrls: property({
    arbitrary: () => fc.tuple(collateralValue, fc.constant(undefined)),
    check: checkRequestUrls,
    runs: fuzzRuns(1500),
  }),
};
