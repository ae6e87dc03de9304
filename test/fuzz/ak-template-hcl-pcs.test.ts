/**
 * Fuzzing the GCE NV AK template parser, the Azure HCL report parsers (TDX and SEV-SNP), the
 * `--tdx-collateral` value (properties in ./props/ak-template-hcl-pcs.props.ts, run in the fuzz
 * worker), and two HTTP response handlers against local servers on 127.0.0.1, run in vitest's thread:
 *  - the azure-tdx issuer's IMDS quote getter (`imdsTdQuoteGetter`) against a FAKE Azure IMDS that
 *    answers with a fuzz-chosen status and body: it resolves only for a 2xx JSON body with a
 *    base64url "quote" string, to exactly those bytes, and otherwise rejects with a ConfbootError;
 *  - IntelPcsCollateralSource against the FAKE Intel PCS (REAL go-tdx-guest collateral) with one
 *    document's status, issuer-chain header or body fuzzed: it resolves with parseable documents or
 *    rejects with a ConfbootError naming that document's URL, and never caches the failure (the
 *    same source succeeds as soon as the real document is served again).
 */

import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAzureHclReport } from '../../src/adapters/attestation/azure/hcl-report.js';
import { imdsTdQuoteGetter } from '../../src/adapters/attestation/azure/tdquote.js';
import { parseCrl } from '../../src/adapters/attestation/shared/crl.js';
import { parseAzureSnpHclReport } from '../../src/adapters/attestation/snp/issuers.js';
import { parseSignedJson } from '../../src/adapters/attestation/tdx/collateral.js';
import { IntelPcsCollateralSource } from '../../src/adapters/attestation/tdx/pcs-client.js';
import { codeForHttpStatus } from '../../src/adapters/http/call.js';
import { parseAkTemplate } from '../../src/adapters/tpm/nv-template-ak.js';
import type { ConfbootErrorCode } from '../../src/ports/errors.js';
import { simulatedTdReport } from '../adapters/attestation/tdx/azure-tdx-simulation.js';
import {
  FAKE_PCS_FMSPC,
  type FakePcs,
  PCS_PATHS,
  pcsVector,
  realPcsRoutes,
  startFakePcs,
} from '../adapters/attestation/tdx/fake-pcs.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { fuzzRuns, fuzzSeed, testTimeoutMs, workerTestTimeoutMs } from './harness/config.js';
import { edgeJson, jsonMutated } from './harness/json.js';
import { describeBytes, mutated } from './harness/mutate.js';
import { confbootError, ensure } from './harness/property.js';
import { useFuzzWorker } from './harness/runner.js';
import { akTemplateSeeds, hclReportSeeds } from './props/ak-template-hcl-pcs.props.js';

const fuzz = useFuzzWorker(
  new URL('./props/ak-template-hcl-pcs.props.ts', import.meta.url),
  () => import('./props/ak-template-hcl-pcs.props.js'),
);

describe('AK template, HCL reports and --tdx-collateral under fuzzing', {
  timeout: workerTestTimeoutMs(),
}, () => {
  it('the seeds are valid: every AK template and HCL report parses before it is mutated', () => {
    for (const s of akTemplateSeeds()) expect(parseAkTemplate(s.bytes).raw, s.name).toBe(s.bytes);
    const [tdx, tdxEmpty, snp, real] = hclReportSeeds().map((s) => s.bytes) as Uint8Array[];
    expect(parseAzureHclReport(tdx as Uint8Array).hashesConsistent).toBe(true);
    expect(parseAzureHclReport(tdxEmpty as Uint8Array).runtimeData.length).toBe(0);
    expect(parseAzureSnpHclReport(snp as Uint8Array).runtimeData.length).toBeGreaterThan(0);
    expect(parseAzureHclReport(real as Uint8Array).tdReport.length).toBe(1024);
  });
  it('parseAkTemplate on random bytes and mutated RSA/ECC templates: consistent template or ConfbootError(failed-precondition)', async () => {
    expect(await fuzz.check('akTemplate')).toBeGreaterThan(0);
  });
  it('TDX and SEV-SNP HCL report parsers: results within the report, or a plain Error', async () => {
    expect(await fuzz.check('hclReports')).toBeGreaterThan(0);
  });
  it('parseTdxCollateralSource: a directory, an http(s) PCS URL the PCS client accepts, or ConfbootError(invalid-argument)', async () => {
    expect(await fuzz.check('tdxCollateralSource')).toBeGreaterThan(0);
  });
  // Found by this property and fixed: a base URL ending in a bare "?" or "#" (empty WHATWG
  // search/hash) or with whitespace was accepted and prefixed raw to every request path;
  // checkHttpUrl (pcs-client.ts) now refuses it and normalises what it accepts.
  it('every accepted pcs:URL requests the PCS paths in the URL path (bare "?"/"#" and whitespace refused)', async () => {
    expect(await fuzz.check('tdxCollateralRequestUrls')).toBeGreaterThan(0);
  });
});

// ---- IMDS /acc/tdquote ----

interface ImdsAnswer {
  status: number;
  body: Uint8Array;
  /** The bytes the "quote" was encoded from, when it was. */
  quoteOf?: Uint8Array;
  recipe: string;
}

const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v) ?? '');
const b64url = (b: Uint8Array) => Buffer.from(b).toString('base64url');

function answer(status: number, body: Uint8Array, recipe: string, quoteOf?: Uint8Array): ImdsAnswer {
  const a: ImdsAnswer = { status, body, recipe, ...(quoteOf ? { quoteOf } : {}) };
  return Object.assign(a, {
    [fc.toStringMethod]: () => `HTTP ${status} ${recipe} /* ${describeBytes(body)} */`,
  });
}

/** Quote strings: canonical base64url (padded or not) of known bytes, or anything. */
const quoteString: fc.Arbitrary<{ text: string; of?: Uint8Array }> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .uint8Array({ maxLength: 80 })
      .chain((b) =>
        fc.constantFrom(
          { text: b64url(b), of: b },
          { text: Buffer.from(b).toString('base64'), of: b },
          { text: `${b64url(b)}==`, of: b },
        ),
      ),
  },
  fc.string({ maxLength: 40 }).map((text) => ({ text })),
  fc.string({ maxLength: 20, unit: 'binary' }).map((text) => ({ text })),
  fc.base64String({ maxLength: 40 }).map((text) => ({ text })),
  fc
    .constantFrom('', '=', '==', 'A', 'AA', 'A=', '-_', 'AAAA====', ' AAAA', 'AAAA\n', 'AA=A', 'A+/A', '%41')
    .map((text) => ({ text })),
);

const imdsAnswer: fc.Arbitrary<ImdsAnswer> = fc
  .tuple(
    fc.oneof(
      { weight: 6, arbitrary: fc.constant(200) },
      fc.constantFrom(201, 202, 204, 299, 300, 301, 304, 400, 401, 403, 404, 408, 429, 500, 502, 503, 599),
    ),
    fc.oneof(
      {
        weight: 4,
        arbitrary: quoteString.map((q) => ({
          body: json({ quote: q.text }),
          recipe: `{"quote": ${JSON.stringify(q.text)}}`,
          of: q.of,
        })),
      },
      edgeJson.map((v) => ({
        body: json({ quote: v }),
        recipe: `{"quote": ${JSON.stringify(v)}}`,
        of: undefined,
      })),
      edgeJson.map((v) => ({ body: json(v), recipe: JSON.stringify(v), of: undefined })),
      jsonMutated([{ name: 'imds-quote', value: { quote: b64url(new Uint8Array(48).fill(7)) } }], 3).map(
        (j) => ({
          body: j.bytes,
          recipe: j.recipe,
          of: undefined,
        }),
      ),
      fc
        .string({ maxLength: 60 })
        .map((s) => ({ body: new TextEncoder().encode(s), recipe: 'text', of: undefined })),
      fc.uint8Array({ maxLength: 100 }).map((b) => ({ body: b, recipe: 'random bytes', of: undefined })),
      fc.constantFrom(
        { body: json({ quote: 'A'.repeat(300 * 1024) }), recipe: 'over 256 KiB', of: undefined },
        { body: new Uint8Array(), recipe: 'empty', of: undefined },
        { body: json([{ quote: 'AAAA' }]), recipe: 'array', of: undefined },
        {
          body: new TextEncoder().encode('{"__proto__":{"quote":"AAAA"}}'),
          recipe: '__proto__ quote',
          of: undefined,
        },
      ),
    ),
  )
  .map(([status, b]) => answer(status, b.body, b.recipe, b.of));

/** The getter's documented response limit. */
const MAX_QUOTE_RESPONSE_BYTES = 256 * 1024;

/** What the getter must resolve to for `a`: the decoded quote, or undefined for a rejection. */
function expectedQuote(a: ImdsAnswer): Uint8Array | undefined {
  if (a.status < 200 || a.status >= 300 || a.status === 204) return undefined;
  if (a.body.length > MAX_QUOTE_RESPONSE_BYTES) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(a.body).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, 'quote')) return undefined;
  const q = (v as { quote: unknown }).quote;
  if (typeof q !== 'string' || q === '') return undefined;
  // At most two padding characters; a length no encoding produces (one character left over) and an
  // empty quote are refused.
  const trimmed = q.replace(/={0,2}$/, '');
  if (!/^[A-Za-z0-9_-]*$/.test(trimmed) || trimmed.length % 4 === 1 || trimmed.length === 0) return undefined;
  return new Uint8Array(Buffer.from(trimmed, 'base64url'));
}

describe('azure-tdx IMDS quote getter under fuzzed responses (FAKE Azure IMDS on 127.0.0.1)', () => {
  let server: Server;
  let base: string;
  let next: ImdsAnswer = answer(200, json({ quote: 'AAAA' }), 'initial');
  let lastRequest: { method: string; url: string; body: string } | undefined;
  const received = () => lastRequest;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        lastRequest = {
          method: req.method ?? '',
          url: req.url ?? '',
          body: Buffer.concat(chunks).toString(),
        };
        const a = next;
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(Buffer.from(a.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const runs = fuzzRuns(50, 'heavy');
  it(
    'resolves to the decoded quote only for a 2xx JSON body with a base64url "quote" string; otherwise a ConfbootError',
    async () => {
      const tdReport = simulatedTdReport(new Uint8Array(64).fill(0x42));
      const getQuote = imdsTdQuoteGetter({ baseUrl: `${base}/`, timeoutInMs: 5000 });
      const url = `${base}/acc/tdquote`;
      await fc.assert(
        fc.asyncProperty(imdsAnswer, async (a) => {
          next = a;
          lastRequest = undefined;
          const want = expectedQuote(a);
          const got = await getQuote(tdReport).then(
            (quote) => ({ ok: true as const, quote }),
            (err: unknown) => ({ ok: false as const, err }),
          );
          const req = received();
          ensure(req?.method === 'POST' && req.url === '/acc/tdquote', `request was ${JSON.stringify(req)}`);
          const sent = JSON.parse(req?.body ?? '{}') as { report?: unknown };
          ensure(sent.report === b64url(tdReport), 'the request does not carry the TDREPORT as base64url');
          if (got.ok) {
            ensure(
              want !== undefined,
              `resolved with ${got.quote.length} bytes for a response that must be refused`,
            );
            ensure(
              Buffer.from(got.quote).equals(Buffer.from(want as Uint8Array)),
              'resolved with other bytes',
            );
            if (a.quoteOf)
              ensure(Buffer.from(got.quote).equals(Buffer.from(a.quoteOf)), 'not the encoded bytes');
            return;
          }
          // The body limit applies while reading, before the status is looked at (204/304 carry no body).
          const oversized = a.body.length > MAX_QUOTE_RESPONSE_BYTES && a.status !== 204 && a.status !== 304;
          const code: ConfbootErrorCode =
            oversized || (a.status >= 200 && a.status < 300) ? 'internal' : codeForHttpStatus(a.status);
          ensure(want === undefined, `rejected a valid quote response: ${String(got.err)}`);
          ensure(
            confbootError(code).test(got.err),
            `rejected with ${String(got.err)}, want ConfbootError(${code})`,
          );
          ensure(String((got.err as Error).message).includes(url), 'the error does not name the URL');
        }),
        { numRuns: runs, seed: fuzzSeed(), timeout: 10_000 },
      );
    },
    testTimeoutMs(runs, 100),
  );
});

// ---- Intel PCS ----

type PcsDoc = 'tcb' | 'qe' | 'pckCrl' | 'rootCrl';

const CHAIN_HEADER: Record<PcsDoc, string | undefined> = {
  tcb: 'TCB-Info-Issuer-Chain',
  qe: 'SGX-Enclave-Identity-Issuer-Chain',
  pckCrl: 'SGX-PCK-CRL-Issuer-Chain',
  rootCrl: undefined,
};
const CHAIN_FILE: Record<PcsDoc, string> = {
  tcb: 'tcbinfo_issuer_chain.pem',
  qe: 'qeidentity_issuer_chain.pem',
  pckCrl: 'pckcrl_issuer_chain.pem',
  rootCrl: 'pckcrl_issuer_chain.pem',
};
const BODY_FILE: Record<PcsDoc, string> = {
  tcb: 'sample_tcbInfo_response',
  qe: 'sample_qeIdentity_response',
  pckCrl: 'pckcrl',
  rootCrl: 'rootcrl.der',
};

/** A header value Node will send: characters outside printable ASCII and tab are percent-encoded. */
const headerSafe = (s: string) =>
  s.replace(/[^\t\x20-\x7e]/gu, (c) => {
    try {
      return encodeURIComponent(c);
    } catch {
      return '%EF%BF%BD'; // a lone surrogate
    }
  });

type HeaderEdit =
  | { kind: 'keep' }
  | { kind: 'absent' }
  | { kind: 'twice' }
  | { kind: 'value'; value: string; recipe: string };
type BodyEdit = { kind: 'keep' } | { kind: 'bytes'; bytes: Uint8Array; recipe: string };

interface PcsCase {
  doc: PcsDoc;
  status: number;
  header: HeaderEdit;
  body: BodyEdit;
}

function headerEdit(doc: PcsDoc): fc.Arbitrary<HeaderEdit> {
  const pem = pcsVector(CHAIN_FILE[doc]);
  const encoded = Buffer.from(encodeURIComponent(pem.toString('latin1')), 'latin1');
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<HeaderEdit>({ kind: 'keep' }) },
    fc.constantFrom<HeaderEdit>({ kind: 'absent' }, { kind: 'twice' }),
    fc
      .string({ maxLength: 60 })
      .map((s) => ({ kind: 'value' as const, value: headerSafe(s), recipe: `string ${JSON.stringify(s)}` })),
    // the URL-encoded chain, mutated as bytes (broken escapes, cut PEM armour)
    mutated([{ name: `${CHAIN_FILE[doc]} (URL-encoded)`, bytes: encoded }], 3).map((m) => ({
      kind: 'value' as const,
      value: headerSafe(Buffer.from(m.bytes).toString('latin1')),
      recipe: m.recipe,
    })),
    // the PEM chain mutated, then URL-encoded properly (certificates that do not parse)
    mutated([{ name: CHAIN_FILE[doc], bytes: pem }], 3).map((m) => ({
      kind: 'value' as const,
      value: encodeURIComponent(Buffer.from(m.bytes).toString('latin1')),
      recipe: `urlencode(${m.recipe})`,
    })),
    fc
      .constantFrom(
        '',
        '%',
        '%E0%A4%A',
        '%00',
        '-----BEGIN CERTIFICATE-----',
        encodeURIComponent('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'),
        encodeURIComponent(pcsVector('qeidentity_issuer_chain.pem').toString('latin1')),
      )
      .map((value) => ({ kind: 'value' as const, value, recipe: JSON.stringify(value.slice(0, 60)) })),
  );
}

function bodyEdit(doc: PcsDoc): fc.Arbitrary<BodyEdit> {
  const real = new Uint8Array(pcsVector(BODY_FILE[doc]));
  const edits: Array<fc.Arbitrary<BodyEdit>> = [
    mutated([{ name: BODY_FILE[doc], bytes: real }], 3).map((m) => ({
      kind: 'bytes' as const,
      bytes: m.bytes,
      recipe: m.recipe,
    })),
    fc
      .uint8Array({ maxLength: 200 })
      .map((b) => ({ kind: 'bytes' as const, bytes: b, recipe: 'random bytes' })),
    fc.constant<BodyEdit>({ kind: 'bytes', bytes: new Uint8Array(), recipe: 'empty' }),
  ];
  if (doc === 'tcb' || doc === 'qe') {
    const value = JSON.parse(Buffer.from(real).toString('utf8')) as unknown;
    edits.push(
      jsonMutated([{ name: BODY_FILE[doc], value }], 3).map((j) => ({
        kind: 'bytes' as const,
        bytes: j.bytes,
        recipe: j.recipe,
      })),
    );
  }
  return fc.oneof({ weight: 3, arbitrary: fc.constant<BodyEdit>({ kind: 'keep' }) }, ...edits);
}

const pcsCase: fc.Arbitrary<PcsCase> = fc
  .oneof(
    { weight: 3, arbitrary: fc.constant<PcsDoc>('tcb') },
    fc.constantFrom<PcsDoc>('qe', 'pckCrl', 'rootCrl'),
  )
  .chain((doc) =>
    fc.record({
      doc: fc.constant(doc),
      status: fc.oneof(
        { weight: 8, arbitrary: fc.constant(200) },
        fc.constantFrom(201, 204, 400, 403, 404, 408, 429, 500, 503),
      ),
      header: CHAIN_HEADER[doc] ? headerEdit(doc) : fc.constant<HeaderEdit>({ kind: 'keep' }),
      body: bodyEdit(doc),
    }),
  )
  .filter((c) => c.status !== 200 || c.header.kind !== 'keep' || c.body.kind !== 'keep');

describe('IntelPcsCollateralSource under fuzzed PCS responses (FAKE Intel PCS on 127.0.0.1, REAL collateral)', () => {
  let fake: FakePcs;
  beforeAll(async () => {
    fake = await startFakePcs();
  });
  afterAll(() => fake.close());

  const pathOf = (doc: PcsDoc) => PCS_PATHS[doc];

  function serve(c: PcsCase): void {
    fake.reset();
    const path = pathOf(c.doc);
    const route = realPcsRoutes()[path];
    if (!route) throw new Error(`no real route for ${path}`);
    const headers: Record<string, string | string[]> = { ...route.headers };
    const name = CHAIN_HEADER[c.doc];
    if (name && c.header.kind === 'absent') delete headers[name];
    if (name && c.header.kind === 'twice') headers[name] = [headers[name] as string, headers[name] as string];
    if (name && c.header.kind === 'value') headers[name] = c.header.value;
    fake.routes[path] = {
      status: c.status,
      headers: headers as Record<string, string>,
      body: c.body.kind === 'keep' ? route.body : Buffer.from(c.body.bytes),
    };
  }

  const runs = fuzzRuns(40, 'heavy');
  it(
    'resolves with parseable documents or rejects with a ConfbootError naming the URL, and never caches the failure',
    async () => {
      const clock = new FakeClock(new Date('2023-07-01T00:00:00Z'));
      await fc.assert(
        fc.asyncProperty(pcsCase, async (c) => {
          serve(c);
          const pcs = new IntelPcsCollateralSource({
            clock,
            baseUrl: fake.base,
            rootCrlUrl: fake.rootCrlUrl,
            timeoutInMs: 5000,
          });
          const url = pathOf(c.doc) === PCS_PATHS.rootCrl ? fake.rootCrlUrl : `${fake.base}${pathOf(c.doc)}`;
          const first = await pcs.getCollateral(FAKE_PCS_FMSPC).then(
            (value) => ({ ok: true as const, value }),
            (err: unknown) => ({ ok: false as const, err }),
          );
          if (first.ok) {
            const v = first.value;
            ensure(c.status >= 200 && c.status < 300, `resolved although ${url} answered HTTP ${c.status}`);
            parseSignedJson(v.tcbInfo, 'tcbInfo');
            parseSignedJson(v.qeIdentity, 'enclaveIdentity');
            await parseCrl(v.pckCrl);
            await parseCrl(v.rootCrl);
            for (const chain of [v.tcbInfoIssuerChain, v.qeIdentityIssuerChain, v.pckCrlIssuerChain])
              ensure(
                chain.length > 0 && chain.every((x) => x instanceof X509Certificate),
                'an empty issuer chain',
              );
          } else {
            const codes: ConfbootErrorCode[] =
              c.status >= 200 && c.status < 300 ? ['unavailable'] : [codeForHttpStatus(c.status)];
            ensure(
              codes.some((code) => confbootError(code).test(first.err)),
              `rejected with ${String(first.err)}, want ConfbootError(${codes.join('|')})`,
            );
            ensure(
              String((first.err as Error).message).includes(`GET ${url}`),
              `the error does not name GET ${url}`,
            );
          }
          // The real document again: the same source succeeds, refetching only what failed.
          fake.reset();
          const second = await pcs.getCollateral(FAKE_PCS_FMSPC);
          ensure(second.tcbInfoIssuerChain.length > 0, 'no TCB info chain after recovery');
          const refetched = fake.count(pathOf(c.doc));
          ensure(
            refetched === (first.ok ? 0 : 1),
            `${url} was requested ${refetched} times after the first call ${first.ok ? 'succeeded (cached)' : 'failed'}`,
          );
        }),
        { numRuns: runs, seed: fuzzSeed(), timeout: 15_000 },
      );
    },
    testTimeoutMs(runs, 300),
  );
});
