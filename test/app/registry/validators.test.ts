/**
 * The app-level validator construction (src/app/registry/validators.ts) and the join service's production
 * builder on it:
 *  - every SEV-SNP/TDX variant is built from a sample attestation config with the REAL trust
 *    anchors of ../shared/testvectors (read at test time);
 *  - azure-sev-snp accepts the REAL Azure report through the app-level builder with a STUB vTPM
 *    half (as the committed SNP validator tests do: the report binds an AK whose TPM quote does
 *    not exist), and the config's TCB/ID-key policy and configured ASK take effect;
 *  - aws-sev-snp end to end with the REAL vTPM quote verifier: a soft TPM's genuine TPM-format
 *    quote and a report from a FAKE AMD hierarchy (no SEV-SNP hardware here) binding that AK;
 *  - qemu-tdx on a REAL go-tdx-guest quote: the PCK chain to the configured Intel root verifies and
 *    only the report data (which cannot bind a test nonce) fails;
 *  - bad configs fail closed, naming the field; `dummy` is refused everywhere;
 *  - the TDX collateral sources (`--tdx-collateral DIR|pcs|pcs:URL`): the REAL go-tdx-guest v4
 *    quote through the app-level qemu-tdx builder with collateral from the vector directory and
 *    from a FAKE Intel PCS serving the same real collateral yields the same checks.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { VerifyVtpmQuote } from '../../../src/adapters/attestation/shared/cvm-document.js';
import { parseVtpmDocument } from '../../../src/adapters/attestation/shared/cvm-document.js';
import { AmdCertCache } from '../../../src/adapters/attestation/snp/cert-cache.js';
import {
  parseTdxCollateralSource,
  tdxCollateralGetter,
} from '../../../src/adapters/attestation/tdx/config.js';
import { createVtpmQuoteVerifier } from '../../../src/adapters/attestation/vtpm/cvm-quote.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { variantOid } from '../../../src/app/registry/index.js';
import type { ValidatorDeps } from '../../../src/app/registry/validator-deps.js';
import {
  buildValidator,
  SNP_TDX_VARIANTS,
  VALIDATOR_VARIANTS,
} from '../../../src/app/registry/validators.js';
import type { AmdCertFetcher } from '../../../src/ports/amd-cert-fetcher.js';
import { isAttestationError, isConfbootError } from '../../../src/ports/errors.js';
import type { GceShieldedIdentity } from '../../../src/ports/gce-shielded-identity.js';
import { PRODUCTION_VARIANTS, type Variant } from '../../../src/ports/variant.js';
import {
  buildFakeReport,
  createFakeAmdCrl,
  createFakeAmdPki,
  FAKE_SERIALS,
  type FakeAmdPki,
} from '../../adapters/attestation/snp/fake-amd-pki.js';
import { rsaTpmtPublic } from '../../adapters/attestation/snp/tpmt-fixture.js';
import { describeVectors, VECTORS, vec } from '../../adapters/attestation/snp/vectors.js';
import {
  FAKE_PCS_FMSPC,
  type FakePcs,
  PCS_PATHS,
  startFakePcs,
} from '../../adapters/attestation/tdx/fake-pcs.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { attestationRejection } from '../../support/attestation-rejection.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';

const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');
const ZERO32 = '00'.repeat(32);
const AZURE_ID_KEY_DIGEST =
  '57e229e0ffe5fa92d0faddff6cae0e61c926fc9ef9afd20a8b8cfcf7129db9338cbe5bf3f6987733a2bf65d06dc38fc1';

/** A fetcher that must never be asked (the tests use no network). */
const NO_NETWORK: AmdCertFetcher = {
  fetchVcek: async () => {
    throw new Error('test: no AMD KDS here');
  },
  fetchCertChain: async () => {
    throw new Error('test: no AMD KDS here');
  },
};

/** STUB GCE lookup: the instance's AK. */
const gceStub = (pem: string): GceShieldedIdentity => ({ signingKeyPem: async () => pem });

const rejectionOf = attestationRejection;

function configError(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (!isConfbootError(err)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
    return { code: err.code, message: err.message };
  }
  throw new Error('expected the build to fail');
}

/** Sample attestation configs, upstream field names, real trust anchors. */
function sampleConfig(variant: Variant): Record<string, unknown> {
  const amdRootKey = vec('constellation/trust-anchors/amd-ark-milan.pem').toString('utf8');
  const intelRootKey = vec('constellation/trust-anchors/intel-sgx-root-ca.pem').toString('utf8');
  // A boot-chain PCR at a measured value and the node lock (PCR 15) zero: what the join service requires.
  const pcrs = {
    4: { expected: 'ab'.repeat(32), warnOnly: false },
    15: { expected: ZERO32, warnOnly: false },
  };
  const tcb = { bootloaderVersion: 2, teeVersion: 0, snpVersion: 6, microcodeVersion: 93 };
  switch (variant) {
    case 'aws-sev-snp':
    case 'gcp-sev-snp':
      return { measurements: pcrs, ...tcb, amdRootKey };
    case 'azure-sev-snp':
      return {
        measurements: pcrs,
        ...tcb,
        firmwareSignerConfig: { acceptedKeyDigests: [AZURE_ID_KEY_DIGEST], enforcementPolicy: 'MAAFallback' },
        amdRootKey,
      };
    case 'azure-tdx':
      return {
        measurements: pcrs,
        qeSVN: 0,
        pceSVN: 0,
        teeTCBSVN: '00'.repeat(16),
        qeVendorID: '939a7233f79c4ca9940a0db3957f0607',
        xfam: 'e702060000000000',
        intelRootKey,
      };
    case 'qemu-tdx':
      return {
        measurements: {
          0: { expected: 'ab'.repeat(48), warnOnly: false },
          3: { expected: '00'.repeat(48), warnOnly: false },
        },
        intelRootKey,
      };
    default:
      return { measurements: pcrs };
  }
}

const clock = () => new FakeClock(new Date('2026-11-21T00:00:00Z'));
const text = (o: unknown) => Buffer.from(JSON.stringify(o));

describeVectors(
  'the join service production builder on the SEV-SNP/TDX variants (real trust anchors)',
  () => {
    it.each(SNP_TDX_VARIANTS)('builds the %s validator from a sample attestation config', (variant) => {
      const lookups =
        variant === 'gcp-sev-snp'
          ? { gceShieldedIdentity: gceStub(''), amdCertCache: new AmdCertCache(NO_NETWORK, clock()) }
          : {};
      const build = validatorBuilder(variant, lookups, clock(), silentLogger);
      const v = build(text(sampleConfig(variant)));
      expect(v.oid).toBe(variantOid(variant));
    });

    it('every production variant has a validator; dummy has none', () => {
      expect([...VALIDATOR_VARIANTS].sort()).toEqual([...PRODUCTION_VARIANTS].sort());
      expect(() => validatorBuilder('dummy', {}, clock(), silentLogger)).toThrow(/tests only/);
      expect(
        configError(() => buildValidator('dummy', text({ measurements: {} }), { clock: clock() })),
      ).toEqual({
        code: 'invalid-argument',
        message: 'the dummy attestation variant is for tests only and cannot be configured',
      });
    });
  },
);

describeVectors(
  'azure-sev-snp through the app-level builder on the real Azure report (STUB vTPM half)',
  () => {
    const runtime = () => vec('constellation/snp/runtimedata.bin');
    const akModulus = () =>
      Buffer.from(
        (JSON.parse(runtime().toString('utf8')) as { keys: { n: string }[] }).keys[0]?.n ?? '',
        'base64url',
      );
    const userData = Buffer.from('tls-key-hash');
    const nonce = Buffer.alloc(32, 0x5a);
    const PCR4 = Buffer.alloc(32, 4);
    /** STUB vTPM verifier (the report binds an AK whose quote does not exist): returns PCR 4. */
    const stubVtpm: VerifyVtpmQuote = async () => ({
      pcrs: new Map([[4, PCR4]]),
      checks: [{ name: 'stub-tpm-quote', ok: true, detail: 'STUB' }],
    });
    const doc = (info: Record<string, unknown> = {}) =>
      text({
        Attestation: { ak_pub: b64(rsaTpmtPublic(akModulus())), quotes: [] },
        InstanceInfo: b64(
          JSON.stringify({
            ReportSigner: b64(vec('constellation/snp/vcek.pem')),
            CertChain: b64(vec('constellation/snp/certchain.pem')),
            AttestationReport: b64(vec('constellation/snp/attestation.bin')),
            Azure: { RuntimeData: b64(runtime()), MAAToken: '' },
            GCP: null,
            ...info,
          }),
        ),
        UserData: b64(userData),
      });
    const config = (extra: Record<string, unknown> = {}) =>
      text({
        ...sampleConfig('azure-sev-snp'),
        measurements: { 4: PCR4.toString('hex') },
        // The vectors hold no AMD CRL (KDS serves it); revocation is tested with a fake KDS elsewhere.
        amdCRL: 'off',
        ...extra,
      });
    const deps = (extra: Partial<ValidatorDeps> = {}): ValidatorDeps => ({
      clock: clock(),
      verifyVtpmQuote: stubVtpm,
      amdCertCache: new AmdCertCache(NO_NETWORK, clock()),
      ...extra,
    });

    it('accepts it with the config policy (minimum TCB, ID-key digest under MAAFallback = Equal)', async () => {
      const res = await buildValidator('azure-sev-snp', config(), deps()).validate(doc(), nonce);
      expect(Buffer.from(res.userData).equals(userData)).toBe(true);
      expect(res.checks.filter((c) => !c.ok)).toEqual([]);
      expect(res.checks.map((c) => c.name)).toEqual(
        expect.arrayContaining([
          'report-signature',
          'ark-pinned',
          'minimum-tcb',
          'minimum-launch-tcb',
          'id-key-digest',
          'hcl-ak',
          'stub-tpm-quote',
          'measurements',
        ]),
      );
    });

    it('rejects it when the config raises the minimum microcode version or lists another ID key', async () => {
      const low = await rejectionOf(
        buildValidator('azure-sev-snp', config({ microcodeVersion: 94 }), deps()).validate(doc(), nonce),
      );
      expect(low.failed).toEqual(['minimum-tcb', 'minimum-launch-tcb']);
      const otherKey = await rejectionOf(
        buildValidator(
          'azure-sev-snp',
          config({
            firmwareSignerConfig: { acceptedKeyDigests: ['11'.repeat(48)], enforcementPolicy: 'Equal' },
          }),
          deps(),
        ).validate(doc(), nonce),
      );
      expect(otherKey.failed).toEqual(['id-key-digest']);
    });

    it('uses the configured amdSigningKey when the document carries no chain (no KDS request)', async () => {
      const cache = new AmdCertCache(NO_NETWORK, clock());
      const ask = vec('constellation/snp/certchain.pem')
        .toString('utf8')
        .split('-----END CERTIFICATE-----')[0];
      const withAsk = config({ amdSigningKey: `${ask}-----END CERTIFICATE-----\n` });
      const res = await buildValidator('azure-sev-snp', withAsk, deps({ amdCertCache: cache })).validate(
        doc({ CertChain: null }),
        nonce,
      );
      expect(res.checks.find((c) => c.name === 'ask-signature')).toMatchObject({ ok: true });
      expect(cache.fetches).toBe(0);
      // Without it, the shared cache is asked — and here it cannot reach AMD.
      const err = await rejectionOf(
        buildValidator('azure-sev-snp', config(), deps({ amdCertCache: cache })).validate(
          doc({ CertChain: null }),
          nonce,
        ),
      );
      expect(err.check).toBe('certificates');
      expect(err.message).toContain('no AMD KDS here');
    });
  },
);

describe('aws-sev-snp end to end with the REAL vTPM quote verifier (soft TPM, FAKE AMD hierarchy)', () => {
  let pki: FakeAmdPki;
  let crl: Uint8Array;
  beforeAll(async () => {
    pki = await createFakeAmdPki();
    crl = await createFakeAmdCrl(pki, { revoked: ['77'] });
  }, 30_000);
  const nonce = Buffer.alloc(32, 9);
  const userData = Buffer.from('tls-key-hash');
  /** FAKE KDS: only AMD's CRL (the default amdCRL "enforce" asks for it); certificates come from config. */
  const crlOnly = (): AmdCertFetcher => ({ ...NO_NETWORK, fetchCrl: async () => crl });

  function awsConfig(extra: Record<string, unknown> = {}) {
    return text({
      measurements: { 4: ZERO32, 15: ZERO32 },
      bootloaderVersion: pki.tcb.bl,
      teeVersion: pki.tcb.tee,
      snpVersion: pki.tcb.snp,
      microcodeVersion: pki.tcb.ucode,
      amdRootKey: pki.arkPem,
      amdSigningKey: pki.asvkPem,
      ...extra,
    });
  }
  /** A node: soft TPM AK, and a VLEK report with report_data = SHA-512(AK SPKI). */
  function node(tpm = SoftTpm.create(), boundTo = tpm.akPublicKeySpki()) {
    const report = buildFakeReport(pki, {
      signingKey: 'vlek',
      reportData: createHash('sha512').update(boundTo).digest(),
    });
    const instanceInfo = Buffer.from(
      JSON.stringify({
        ReportSigner: b64(pki.vlekPem),
        AttestationReport: b64(report),
        Azure: null,
        GCP: null,
      }),
    );
    return new SoftVtpmIssuer(tpm, 'aws-sev-snp', { instanceInfo });
  }
  const validator = (extra: Record<string, unknown> = {}) =>
    buildValidator('aws-sev-snp', awsConfig(extra), {
      clock: new FakeClock(new Date('2026-01-01T00:00:00Z')),
      amdCertCache: new AmdCertCache(crlOnly(), clock()),
    });

  it('accepts a genuine quote whose AK the report binds, with the PCRs of the config', async () => {
    const doc = await node().issue(userData, nonce);
    const res = await validator().validate(doc, nonce);
    expect(res.checks.find((c) => c.name === 'amd-crl')?.detail).toMatch(
      /^ARK-Milan CRL of .* lists neither SEV-VLEK-Milan nor SEV-VLEK$/,
    );
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining(['report-data', 'ak-trust', 'sha256-quote', 'quote-signature', 'measurements']),
    );
  });

  it('rejects a changed PCR, a replayed nonce and a report bound to another AK', async () => {
    const tampered = SoftTpm.create();
    tampered.extend(SHA256, 4, createHash('sha256').update('rogue').digest());
    const pcr = await rejectionOf(validator().validate(await node(tampered).issue(userData, nonce), nonce));
    expect(pcr.check).toBe('measurements');

    const replay = await rejectionOf(
      validator().validate(await node().issue(userData, nonce), Buffer.alloc(32, 10)),
    );
    expect(replay.check).toBe('extra-data');

    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
      type: 'spki',
      format: 'der',
    });
    const wrongAk = await rejectionOf(
      validator().validate(await node(SoftTpm.create(), other).issue(userData, nonce), nonce),
    );
    expect(wrongAk.failed).toEqual(['report-data']);
  });

  it('refuses a node whose VLEK is on AMD\'s CRL (default amdCRL "enforce", FAKE KDS), and without KDS access', async () => {
    const revoking = await createFakeAmdCrl(pki, { revoked: [FAKE_SERIALS.vlek] });
    const revoked = await rejectionOf(
      buildValidator('aws-sev-snp', awsConfig(), {
        clock: new FakeClock(new Date('2026-01-01T00:00:00Z')),
        amdCertCache: new AmdCertCache({ ...NO_NETWORK, fetchCrl: async () => revoking }, clock()),
      }).validate(await node().issue(userData, nonce), nonce),
    );
    expect(revoked.failed).toEqual(['amd-crl']);
    expect(revoked.message).toContain('amd-crl: SEV-VLEK serial 5 is revoked by the ARK-Milan CRL');
    const noKds = await rejectionOf(
      buildValidator('aws-sev-snp', awsConfig(), {
        clock: new FakeClock(new Date('2026-01-01T00:00:00Z')),
        amdCertCache: new AmdCertCache(NO_NETWORK, clock()),
      }).validate(await node().issue(userData, nonce), nonce),
    );
    expect(noKds.failed).toEqual(['amd-crl']);
    expect(noKds.message).toContain(
      "fetching AMD's milan VLEK CRL: this certificate source cannot fetch CRLs",
    );
  });

  it('the vTPM half alone: refuses an AK other than the one the hardware binds', async () => {
    const tpm = SoftTpm.create();
    const doc = parseVtpmDocument(await node(tpm).issue(userData, nonce));
    const someoneElse = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    const err = await createVtpmQuoteVerifier()(doc.attestation, { nonce, trustedAk: someoneElse }).catch(
      (e: unknown) => e,
    );
    expect(isAttestationError(err) && err.check).toBe('ak-trust');
  });
});

describeVectors('qemu-tdx through the app-level builder on a real quote', () => {
  it('verifies the PCK chain to the configured Intel root; only the report data (a test nonce) fails', async () => {
    const v = buildValidator('qemu-tdx', text(sampleConfig('qemu-tdx')), { clock: clock() });
    const doc = text({
      RawQuote: b64(vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')),
      UserData: b64('u'),
    });
    const r = await rejectionOf(v.validate(doc, Buffer.alloc(32, 1)));
    expect(r.failed).toEqual(['report-data']);

    const strict = buildValidator(
      'qemu-tdx',
      text({ ...sampleConfig('qemu-tdx'), mrSeam: 'ab'.repeat(48) }),
      { clock: clock() },
    );
    expect((await rejectionOf(strict.validate(doc, Buffer.alloc(32, 1)))).failed).toEqual([
      'mr-seam',
      'report-data',
    ]);
  });
});

describeVectors('bad attestation configs fail closed with the field named', () => {
  const build = (variant: Variant, config: Record<string, unknown>, deps: Partial<ValidatorDeps> = {}) =>
    configError(() => buildValidator(variant, text(config), { clock: clock(), ...deps }));
  const without = (variant: Variant, field: string) => {
    const c = sampleConfig(variant);
    delete c[field];
    return c;
  };

  it.each([
    [
      'no amdRootKey',
      'aws-sev-snp',
      without('aws-sev-snp', 'amdRootKey'),
      /amdRootKey: missing: the AMD root key .* has no default/,
    ],
    [
      '"latest"',
      'aws-sev-snp',
      { ...sampleConfig('aws-sev-snp'), snpVersion: 'latest' },
      /snpVersion: "latest" is resolved by upstream/,
    ],
    [
      'no microcodeVersion',
      'aws-sev-snp',
      without('aws-sev-snp', 'microcodeVersion'),
      /microcodeVersion: want an integer 0…255, got undefined/,
    ],
    [
      'a misspelt field',
      'azure-sev-snp',
      { ...sampleConfig('azure-sev-snp'), bootloaderVersio: 2 },
      /bootloaderVersio: unknown field/,
    ],
    [
      'an ARK that is not PEM',
      'gcp-sev-snp',
      { ...sampleConfig('gcp-sev-snp'), amdRootKey: 'not a pem' },
      /amdRootKey: parsing AMD root key/,
    ],
    [
      'a short ID-key digest',
      'azure-sev-snp',
      {
        ...sampleConfig('azure-sev-snp'),
        firmwareSignerConfig: { acceptedKeyDigests: ['abcd'], enforcementPolicy: 'Equal' },
      },
      /acceptedKeyDigests\[0\]: want 48 bytes of hex/,
    ],
    [
      'an unknown enforcement policy',
      'azure-sev-snp',
      {
        ...sampleConfig('azure-sev-snp'),
        firmwareSignerConfig: { acceptedKeyDigests: [], enforcementPolicy: 'Sometimes' },
      },
      /enforcementPolicy: want "Equal", "MAAFallback" or "WarnOnly"/,
    ],
    [
      'an Intel root as ARK',
      'aws-sev-snp',
      {
        ...sampleConfig('aws-sev-snp'),
        amdRootKey: vec('constellation/trust-anchors/intel-sgx-root-ca.pem').toString(),
      },
      /amdRootKey: not a self-signed ARK-Milan/,
    ],
    [
      'a Genoa ASK for Milan',
      'aws-sev-snp',
      {
        ...sampleConfig('aws-sev-snp'),
        amdSigningKey: vec('go-sev-guest/trust/ask_ark_genoa.pem').toString(),
      },
      /amdSigningKey: want SEV-Milan or SEV-VLEK-Milan, got SEV-Genoa/,
    ],
    [
      '48-byte measurements',
      'aws-sev-snp',
      { ...sampleConfig('aws-sev-snp'), measurements: { 0: { expected: '00'.repeat(48) } } },
      /measurements: index 0 has 48 bytes; aws-sev-snp measures SHA-256 PCRs/,
    ],
    [
      'no intelRootKey',
      'qemu-tdx',
      without('qemu-tdx', 'intelRootKey'),
      /intelRootKey: missing: the Intel SGX root CA/,
    ],
    [
      '32-byte TDX measurements',
      'qemu-tdx',
      { ...sampleConfig('qemu-tdx'), measurements: { 0: ZERO32 } },
      /qemu-tdx measures MRTD\/RTMRs \(48 bytes\)/,
    ],
    [
      'no qeSVN',
      'azure-tdx',
      without('azure-tdx', 'qeSVN'),
      /qeSVN: missing \(azure-tdx requires it, as upstream\)/,
    ],
    ['a short xfam', 'azure-tdx', { ...sampleConfig('azure-tdx'), xfam: 'e7' }, /xfam: want 8 bytes of hex/],
    [
      'an empty measurements map',
      'qemu-vtpm',
      { measurements: {} },
      /building the qemu-vtpm validator: invalid measurements: no measurements/,
    ],
  ] as const)('%s (%s)', (_name, variant, config, message) => {
    const e = build(variant, config);
    expect(e.code).toBe('invalid-argument');
    expect(e.message).toMatch(message);
    expect(e.message).toContain(variant);
  });

  it('gcp-sev-snp without the GCE lookup is a failed precondition; not JSON is invalid', () => {
    expect(build('gcp-sev-snp', sampleConfig('gcp-sev-snp'))).toEqual({
      code: 'failed-precondition',
      message: 'building the gcp-sev-snp validator: no GCE shielded identity lookup configured',
    });
    expect(configError(() => buildValidator('azure-tdx', 'not json', { clock: clock() })).message).toMatch(
      /building the azure-tdx validator: invalid attestation config: not JSON/,
    );
  });

  it('the production builder fails closed on a bad config and keeps failing (nothing is cached)', () => {
    const build = validatorBuilder('azure-sev-snp', {}, clock(), silentLogger);
    expect(() => build(text(without('azure-sev-snp', 'amdRootKey')))).toThrow(/amdRootKey: missing/);
    expect(build(text(sampleConfig('azure-sev-snp'))).oid).toBe(variantOid('azure-sev-snp'));
  });
});

describe('TDX collateral sources (--tdx-collateral DIR|pcs|pcs:URL)', () => {
  it('parses pcs, pcs:URL and a directory, and refuses what is neither', () => {
    expect(parseTdxCollateralSource('pcs')).toEqual({
      kind: 'pcs',
      baseUrl: 'https://api.trustedservices.intel.com',
    });
    expect(parseTdxCollateralSource('pcs:http://pccs.internal:8081')).toEqual({
      kind: 'pcs',
      baseUrl: 'http://pccs.internal:8081',
    });
    expect(parseTdxCollateralSource('/etc/tdx')).toEqual({ kind: 'dir', dir: '/etc/tdx' });
    expect(parseTdxCollateralSource('./pcs')).toEqual({ kind: 'dir', dir: './pcs' });
    for (const bad of ['', 'pcs:', 'pcs:ftp://x', 'pcs:not a url', 'pcs:https://x/?fmspc=1'])
      expect(() => parseTdxCollateralSource(bad)).toThrow(
        expect.objectContaining({ code: 'invalid-argument' }),
      );
  });

  it('a directory source names the directory when it cannot read it (unavailable)', async () => {
    const get = tdxCollateralGetter({ kind: 'dir', dir: '/nonexistent/tdx' }, clock());
    await expect(get(FAKE_PCS_FMSPC)).rejects.toThrow(
      expect.objectContaining({
        code: 'unavailable',
        message: expect.stringContaining(`FMSPC ${FAKE_PCS_FMSPC} from /nonexistent/tdx`),
      }),
    );
  });
});

describeVectors(
  'qemu-tdx through the app-level builder with collateral from a directory and from a FAKE Intel PCS',
  () => {
    let pcs: FakePcs;
    beforeAll(async () => {
      pcs = await startFakePcs();
    });
    afterAll(() => pcs.close());

    const checksWith = async (getTdxCollateral: ValidatorDeps['getTdxCollateral']) => {
      const at = new FakeClock(new Date('2023-07-01T00:00:00Z'));
      const v = buildValidator('qemu-tdx', text(sampleConfig('qemu-tdx')), {
        clock: at,
        ...(getTdxCollateral ? { getTdxCollateral } : {}),
      });
      const doc = text({
        RawQuote: b64(vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat')),
        UserData: b64('u'),
      });
      const err = await v.validate(doc, Buffer.alloc(32, 1)).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (!isAttestationError(err)) throw new Error(`expected an AttestationError, got ${String(err)}`);
      return err.checks;
    };

    it('PCS and directory collateral give the same checks: signatures, validity and CRLs pass; the TCB level (enforced) and the test nonce fail', async () => {
      pcs.reset();
      const fromPcs = await checksWith(
        tdxCollateralGetter(parseTdxCollateralSource(`pcs:${pcs.base}`), clock(), {
          rootCrlUrl: pcs.rootCrlUrl,
        }),
      );
      const fromDir = await checksWith(
        tdxCollateralGetter(parseTdxCollateralSource(`${VECTORS}/go-tdx-guest/testdata`), clock()),
      );
      expect(fromPcs).toEqual(fromDir);
      expect(fromPcs.filter((c) => !c.ok).map((c) => c.name)).toEqual(['report-data', 'tcb-level']);
      for (const name of ['tcb-info-signature', 'qe-identity-signature', 'root-crl', 'pck-crl'])
        expect(fromPcs.find((c) => c.name === name)?.ok).toBe(true);
      expect(Object.values(PCS_PATHS).map((p) => pcs.count(p))).toEqual([1, 1, 1, 1]);

      const chainOnly = await checksWith(undefined);
      expect(chainOnly.some((c) => c.name === 'tcb-info-signature')).toBe(false);
    });

    it('a PCS failure refuses the document with the collateral check naming the URL', async () => {
      pcs.reset();
      pcs.routes[PCS_PATHS.tcb] = { status: 503, headers: {}, body: Buffer.from('maintenance') };
      const checks = await checksWith(
        tdxCollateralGetter({ kind: 'pcs', baseUrl: pcs.base }, clock(), { rootCrlUrl: pcs.rootCrlUrl }),
      );
      const collateral = checks.find((c) => c.name === 'collateral');
      expect(collateral?.ok).toBe(false);
      expect(collateral?.detail).toContain(`${pcs.base}${PCS_PATHS.tcb}`);
      expect(collateral?.detail).toContain('HTTP 503');
    });
  },
);
