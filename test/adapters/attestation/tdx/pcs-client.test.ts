/**
 * IntelPcsCollateralSource against a FAKE Intel PCS: a local HTTP server on 127.0.0.1 that serves
 * the REAL go-tdx-guest collateral (../shared/testvectors, README §4) on the PCS v4 paths with the
 * issuer-chain headers Intel sends (URL-encoded PEM). Checks that the fetched collateral verifies
 * the real v4 quote exactly as the directory's does, caching until nextUpdate (fake clock),
 * single flight, and that failures name the URL and are not cached.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { loadTdxCollateralDir } from '../../../../src/adapters/attestation/tdx/collateral.js';
import {
  INTEL_PCS_BASE_URL,
  INTEL_ROOT_CA_CRL_URL,
  IntelPcsCollateralSource,
  type IntelPcsOptions,
} from '../../../../src/adapters/attestation/tdx/pcs-client.js';
import { verifyTdxQuote } from '../../../../src/adapters/attestation/tdx/verify.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { freePort } from '../../../support/net.js';
import { describeVectors, VECTORS, vec } from '../snp/vectors.js';
import {
  type FakePcs,
  FAKE_PCS_FMSPC as FMSPC,
  PCS_PATHS,
  type PcsRoute as Route,
  realPcsRoutes as realRoutes,
  startFakePcs,
  pcsVector as td,
} from './fake-pcs.js';

const TCB_PATH = PCS_PATHS.tcb;
const QE_PATH = PCS_PATHS.qe;
const PCK_CRL_PATH = PCS_PATHS.pckCrl;
const ROOT_CRL_PATH = PCS_PATHS.rootCrl;
const T = (s: string) => new Date(s);

describeVectors('Intel PCS collateral source (fake PCS serving the real go-tdx-guest collateral)', () => {
  let fake: FakePcs;
  let base: string;
  const count = (path: string) => fake.count(path);
  const total = () => fake.total();
  // The fake's routes (tests change its entries; the fake serves what it holds).
  let routes: Record<string, Route>;

  beforeAll(async () => {
    fake = await startFakePcs();
    base = fake.base;
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.reset();
    routes = fake.routes;
  });

  const clock = () => new FakeClock(T('2023-07-01T00:00:00Z'));
  const source = (c: FakeClock, extra: Partial<IntelPcsOptions> = {}) =>
    new IntelPcsCollateralSource({
      clock: c,
      baseUrl: `${base}/`,
      rootCrlUrl: `${base}${ROOT_CRL_PATH}`,
      ...extra,
    });
  const verify = async (collateral: Awaited<ReturnType<typeof loadTdxCollateralDir>>) =>
    verifyTdxQuote(td('tdx_prod_quote_SPR_E4.dat'), {
      root: vec('go-tdx-guest/trust/trusted_root.pem'),
      at: T('2023-07-01T00:00:00Z'),
      collateral,
      policy: { enforceTcbLevel: false },
    });
  const rejection = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfbootError);
    return err as ConfbootError;
  };

  it('fetches collateral that makes verifyTdxQuote accept the real v4 quote with the same checks as the directory', async () => {
    const fetched = await source(clock()).getCollateral(FMSPC);
    const fromDir = await loadTdxCollateralDir(`${VECTORS}/go-tdx-guest/testdata`, FMSPC);
    expect(Buffer.from(fetched.tcbInfo).equals(Buffer.from(fromDir.tcbInfo))).toBe(true);
    expect(Buffer.from(fetched.qeIdentity).equals(Buffer.from(fromDir.qeIdentity))).toBe(true);
    expect(Buffer.from(fetched.pckCrl).equals(Buffer.from(fromDir.pckCrl))).toBe(true);
    expect(Buffer.from(fetched.rootCrl).equals(Buffer.from(fromDir.rootCrl))).toBe(true);
    const fp = (cs: { fingerprint256: string }[]) => cs.map((c) => c.fingerprint256);
    expect(fp(fetched.tcbInfoIssuerChain)).toEqual(fp(fromDir.tcbInfoIssuerChain));
    expect(fp(fetched.qeIdentityIssuerChain)).toEqual(fp(fromDir.qeIdentityIssuerChain));
    expect(fp(fetched.pckCrlIssuerChain)).toEqual(fp(fromDir.pckCrlIssuerChain));

    const [viaPcs, viaDir] = [await verify(fetched), await verify(fromDir)];
    expect(viaPcs.accepted).toBe(true);
    expect(viaPcs.checks).toEqual(viaDir.checks);
    expect(viaPcs.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'tcb-info-signature',
        'tcb-info-fmspc',
        'qe-identity-signature',
        'root-crl',
        'pck-crl',
      ]),
    );
    expect([count(TCB_PATH), count(QE_PATH), count(PCK_CRL_PATH), count(ROOT_CRL_PATH)]).toEqual([
      1, 1, 1, 1,
    ]);
  });

  it('serves the second call from the cache (no request), also for an upper-case FMSPC', async () => {
    const pcs = source(clock());
    const first = await pcs.getCollateral(FMSPC);
    expect(total()).toBe(4);
    const second = await pcs.getCollateral(FMSPC.toUpperCase());
    expect(total()).toBe(4);
    expect(second.tcbInfo).toBe(first.tcbInfo);
  });

  it('refetches each document once its own nextUpdate has passed (fake clock)', async () => {
    const c = clock();
    const pcs = source(c, { maxAgeInMs: 365 * 86_400_000 });
    await pcs.getCollateral(FMSPC);
    // QE identity nextUpdate 2023-07-08T07:24:59Z; PCK CRL 07:27:52Z; TCB info 2023-07-18T08:42:58Z;
    // root CA CRL 2024-04-02.
    await c.advance(T('2023-07-08T07:24:58Z').getTime() - c.now().getTime());
    await pcs.getCollateral(FMSPC);
    expect(total()).toBe(4);
    await c.advance(2_000);
    await pcs.getCollateral(FMSPC);
    expect([count(TCB_PATH), count(QE_PATH), count(PCK_CRL_PATH), count(ROOT_CRL_PATH)]).toEqual([
      1, 2, 1, 1,
    ]);
    await c.advance(T('2023-07-08T07:28:00Z').getTime() - c.now().getTime());
    await pcs.getCollateral(FMSPC);
    expect([count(TCB_PATH), count(QE_PATH), count(PCK_CRL_PATH), count(ROOT_CRL_PATH)]).toEqual([
      1, 3, 2, 1,
    ]);
    // The served QE identity is now past its nextUpdate: kept for staleRetryInMs (60 s), not refetched per call.
    await pcs.getCollateral(FMSPC);
    expect(count(QE_PATH)).toBe(3);
    await c.advance(T('2023-07-18T08:43:00Z').getTime() - c.now().getTime());
    await pcs.getCollateral(FMSPC);
    expect([count(TCB_PATH), count(ROOT_CRL_PATH)]).toEqual([2, 1]);
  });

  it('refetches after maxAgeInMs (default 24 h) even before nextUpdate', async () => {
    const c = clock();
    const pcs = source(c);
    await pcs.getCollateral(FMSPC);
    await c.advance(24 * 3600_000 - 1);
    await pcs.getCollateral(FMSPC);
    expect(total()).toBe(4);
    await c.advance(1);
    await pcs.getCollateral(FMSPC);
    expect(total()).toBe(8);
  });

  it('makes one request per endpoint for concurrent calls, sharing the QE identity and CRLs across FMSPCs', async () => {
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    for (const r of Object.values(routes)) r.hold = held;
    const pcs = source(clock());
    const calls = Array.from({ length: 8 }, () => pcs.getCollateral(FMSPC));
    const other = pcs.getCollateral('00806f050000').catch((e: unknown) => e);
    release();
    const results = await Promise.all(calls);
    expect(new Set(results.map((r) => r.tcbInfo)).size).toBe(1);
    expect((await other) as ConfbootError).toBeInstanceOf(ConfbootError);
    expect([count(TCB_PATH), count(QE_PATH), count(PCK_CRL_PATH), count(ROOT_CRL_PATH)]).toEqual([
      1, 1, 1, 1,
    ]);
    expect(count('/tdx/certification/v4/tcb?fmspc=00806f050000')).toBe(1);
  });

  it.each([
    [404, 'failed-precondition'],
    [500, 'unavailable'],
    [503, 'unavailable'],
    [429, 'unavailable'],
  ] as const)(
    'answers HTTP %i with a %s error naming the URL, and caches nothing of it',
    async (status, code) => {
      const good = routes[TCB_PATH] as Route;
      routes[TCB_PATH] = {
        status,
        headers: { 'content-type': 'text/plain' },
        body: Buffer.from('PCS says no'),
      };
      const pcs = source(clock());
      const err = await rejection(pcs.getCollateral(FMSPC));
      expect(err.code).toBe(code);
      expect(err.message).toContain(`${base}${TCB_PATH}`);
      expect(err.message).toContain(`HTTP ${status}`);
      expect(err.message).toContain('PCS says no');
      routes[TCB_PATH] = good;
      await pcs.getCollateral(FMSPC);
      expect(count(TCB_PATH)).toBe(2);
      await pcs.getCollateral(FMSPC);
      expect(count(TCB_PATH)).toBe(2);
    },
  );

  it('times out a PCS that does not answer (deadline-exceeded naming the URL), then fetches again', async () => {
    let release = () => {};
    routes[QE_PATH] = {
      ...(routes[QE_PATH] as Route),
      hold: new Promise<void>((r) => {
        release = r;
      }),
    };
    const pcs = source(clock(), { timeoutInMs: 150 });
    const err = await rejection(pcs.getCollateral(FMSPC));
    release();
    expect(err.code).toBe('deadline-exceeded');
    expect(err.message).toContain(`${base}${QE_PATH}`);
    expect(err.message).toContain('timed out after 150 ms');
    routes[QE_PATH] = realRoutes()[QE_PATH] as Route;
    await pcs.getCollateral(FMSPC);
    expect(count(QE_PATH)).toBe(2);
  });

  it('reports an unreachable PCS as unavailable, naming the URL', async () => {
    const port = await freePort();
    const pcs = new IntelPcsCollateralSource({
      clock: clock(),
      baseUrl: `http://127.0.0.1:${port}`,
      rootCrlUrl: `${base}${ROOT_CRL_PATH}`,
    });
    const err = await rejection(pcs.getCollateral(FMSPC));
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain(`http://127.0.0.1:${port}/`);
  });

  const garbage: [string, string, (r: Record<string, Route>) => void, RegExp][] = [
    [
      'no TCB-Info-Issuer-Chain header',
      TCB_PATH,
      (r) => {
        delete (r[TCB_PATH] as Route).headers['TCB-Info-Issuer-Chain'];
      },
      /no TCB-Info-Issuer-Chain header/,
    ],
    [
      'a chain header that is not URL-encoded',
      QE_PATH,
      (r) => {
        (r[QE_PATH] as Route).headers['SGX-Enclave-Identity-Issuer-Chain'] = '%E0%A4%A';
      },
      /not URL-encoded/,
    ],
    [
      'a chain header without PEM',
      PCK_CRL_PATH,
      (r) => {
        (r[PCK_CRL_PATH] as Route).headers['SGX-PCK-CRL-Issuer-Chain'] = 'hello%20world';
      },
      /holds no PEM certificate/,
    ],
    [
      'a chain header with a broken PEM certificate',
      TCB_PATH,
      (r) => {
        (r[TCB_PATH] as Route).headers['TCB-Info-Issuer-Chain'] = encodeURIComponent(
          '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
        );
      },
      /TCB-Info-Issuer-Chain certificate/,
    ],
    [
      'a TCB info body that is not JSON',
      TCB_PATH,
      (r) => {
        (r[TCB_PATH] as Route).body = Buffer.from('<html>maintenance</html>');
      },
      /malformed response/,
    ],
    [
      'TCB info for another FMSPC',
      TCB_PATH,
      (r) => {
        (r[TCB_PATH] as Route).body = Buffer.from(
          td('sample_tcbInfo_response')
            .toString('utf8')
            .replace(`"fmspc":"${FMSPC}"`, '"fmspc":"00806f050000"'),
        );
      },
      /is for FMSPC "00806f050000", not 50806f000000/,
    ],
    [
      'a QE identity without a date in nextUpdate',
      QE_PATH,
      (r) => {
        (r[QE_PATH] as Route).body = Buffer.from(
          td('sample_qeIdentity_response')
            .toString('utf8')
            .replace('"nextUpdate":"2023-07-08T07:24:59Z"', '"nextUpdate":"soon"'),
        );
      },
      /enclaveIdentity.nextUpdate "soon" is not a date/,
    ],
    [
      'a PCK CRL that is not a CRL',
      PCK_CRL_PATH,
      (r) => {
        (r[PCK_CRL_PATH] as Route).body = Buffer.from('not a CRL');
      },
      /malformed response/,
    ],
    [
      'a root CA CRL that is not a CRL',
      ROOT_CRL_PATH,
      (r) => {
        (r[ROOT_CRL_PATH] as Route).body = Buffer.alloc(0);
      },
      /malformed response/,
    ],
  ];
  it.each(garbage)(
    'refuses %s with an error naming the URL, and caches nothing of it',
    async (_, path, spoil, why) => {
      spoil(routes);
      const pcs = source(clock());
      const err = await rejection(pcs.getCollateral(FMSPC));
      expect(err.code).toBe('unavailable');
      expect(err.message).toContain(`${base}${path}`);
      expect(err.message).toMatch(why);
      fake.routes = realRoutes();
      await pcs.getCollateral(FMSPC);
      expect(count(path)).toBe(2);
    },
  );

  it.each([
    '50806f00000',
    '50806f0000000',
    '50806f00000g',
    '50806f000000&x=1',
    '../../../../x',
    '50806f000000\n',
    '',
  ])('rejects FMSPC %j before any request', async (bad) => {
    const err = await rejection(source(clock()).getCollateral(bad));
    expect(err.code).toBe('invalid-argument');
    expect(err.message).toContain('is not 6 bytes of hex');
    expect(total()).toBe(0);
  });

  it('stops waiting for a caller whose signal aborts, while the shared fetch completes for the others', async () => {
    let release = () => {};
    routes[TCB_PATH] = {
      ...(routes[TCB_PATH] as Route),
      hold: new Promise<void>((r) => {
        release = r;
      }),
    };
    const pcs = source(clock());
    const ac = new AbortController();
    const aborted = pcs.getCollateral(FMSPC, { signal: ac.signal });
    const patient = pcs.getCollateral(FMSPC);
    ac.abort();
    const err = await rejection(aborted);
    expect(err.message).toContain('aborted by caller');
    release();
    await patient;
    await pcs.getCollateral(FMSPC);
    expect(count(TCB_PATH)).toBe(1);
  });

  it('uses Intel PCS and the Intel root CA CRL by default, and refuses a base URL it cannot use', () => {
    const pcs = new IntelPcsCollateralSource({ clock: clock() });
    expect(pcs.baseUrl).toBe(INTEL_PCS_BASE_URL);
    expect(pcs.rootCrlUrl).toBe(INTEL_ROOT_CA_CRL_URL);
    expect(pcs.tcbInfoUrl(FMSPC)).toBe(`https://api.trustedservices.intel.com${TCB_PATH}`);
    expect(pcs.qeIdentityUrl()).toBe(`https://api.trustedservices.intel.com${QE_PATH}`);
    expect(pcs.pckCrlUrl()).toBe(`https://api.trustedservices.intel.com${PCK_CRL_PATH}`);
    expect(new IntelPcsCollateralSource({ clock: clock(), pckCa: 'processor' }).pckCrlUrl()).toContain(
      'ca=processor&',
    );
    for (const bad of [
      'ftp://pcs.example',
      'not a url',
      'https://pcs.example/?x=1',
      // A bare "?" or "#" has an empty WHATWG search/hash but would swallow the appended PCS path.
      'https://pcs.example/?',
      'https://pcs.example/#',
      'https://pcs.example /',
    ])
      expect(() => new IntelPcsCollateralSource({ clock: clock(), baseUrl: bad })).toThrow(
        /Intel PCS base URL/,
      );
    expect(
      () => new IntelPcsCollateralSource({ clock: clock(), rootCrlUrl: 'http://mirror/root.der?' }),
    ).toThrow(/Intel root CA CRL URL/);
    // What is accepted is normalised: the requests go exactly where the check looked.
    const mirror = new IntelPcsCollateralSource({
      clock: clock(),
      baseUrl: 'HTTP://PCCS.example:8081/pcs//',
    });
    expect(mirror.baseUrl).toBe('http://pccs.example:8081/pcs');
    expect(mirror.qeIdentityUrl()).toBe(`http://pccs.example:8081/pcs${QE_PATH}`);
  });
});
