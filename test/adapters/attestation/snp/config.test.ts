/**
 * The SEV-SNP policy knobs of the attestation config (docs/attestation-config.md), each parsed from
 * config JSON by parseSnpConfig and applied to REAL reports from ../shared/testvectors, each refusing
 * a real vector that violates it with expected and actual in the reason. The mitigation vectors
 * exist from report version 5 on; no real v5 report is available, so the real v3 AWS report is
 * refused for carrying none, and the bit comparison runs on FAKE-hierarchy v5 reports.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadCertificates } from '../../../../src/adapters/attestation/shared/certs.js';
import { parseSnpConfig } from '../../../../src/adapters/attestation/snp/config.js';
import { type SnpVerification, verifySnpReport } from '../../../../src/adapters/attestation/snp/verify.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { buildFakeReport, createFakeAmdPki, type FakeAmdPki } from './fake-amd-pki.js';
import { describeVectors, vec, vecB64 } from './vectors.js';

type Check = { name: string; ok: boolean; detail?: string };
const failedOf = (v: { checks: Check[] }) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const detailOf = (v: { checks: Check[] }, name: string) =>
  v.checks
    .filter((c) => c.name === name)
    .map((c) => c.detail ?? '')
    .join(' | ');

const AZURE_CHIP =
  '9e44aaef02cfca6fddbaca669c6cfd29e1ab8d97ebc939857128acbb13b8740df31436d34e86e5f8ae0cdfeb3a0e185db46decac176cc77d761c22a1b9dcf25b';

describeVectors('SEV-SNP policy knobs on real reports', () => {
  const ark = () => vec('constellation/trust-anchors/amd-ark-milan.pem').toString('utf8');
  const goSevGuestChip = () =>
    Buffer.from(vec('go-sev-guest/verify-testdata/attestation.bin').subarray(0x1a0, 0x1e0)).toString('hex');
  /** The real reports, their signers and chains, at a time their certificates are valid. */
  const azure = {
    report: () => vec('constellation/snp/attestation.bin'),
    signer: () => vec('constellation/snp/vcek.pem'),
    chain: 'constellation/snp/certchain.pem',
    at: new Date('2026-11-21T00:00:00Z'),
    tcb: { bootloaderVersion: 2, teeVersion: 0, snpVersion: 6, microcodeVersion: 93 },
  };
  /** AWS, report version 3, VLEK: current 4/0/24/220, launch and committed 4/0/24/219, reported 4/0/24/217. */
  const aws = {
    report: () => vecB64('constellation/aws-snp/report.txt'),
    signer: () => vec('constellation/aws-snp/vlek.pem'),
    chain: 'constellation/aws-snp/certchain.pem',
    at: new Date('2025-06-01T00:00:00Z'),
    tcb: { bootloaderVersion: 4, teeVersion: 0, snpVersion: 24, microcodeVersion: 217 },
  };
  type Vector = typeof azure;

  function verify(
    v: Vector,
    fields: Record<string, unknown> = {},
    variant: 'aws-sev-snp' | 'azure-sev-snp' = 'aws-sev-snp',
  ): SnpVerification {
    const { policy } = parseSnpConfig(variant, { ...v.tcb, amdRootKey: ark(), ...fields }, new Map());
    const [ask, chainArk] = loadCertificates(vec(v.chain));
    return verifySnpReport(v.report(), v.signer(), { ask, ark: chainArk }, policy, v.at);
  }

  it('the real Azure and AWS reports pass every check under the defaults (CRL aside)', () => {
    for (const v of [azure, aws]) {
      const res = verify(v);
      expect(failedOf(res)).toEqual([]);
    }
  });

  describe('acceptedChipIDs', () => {
    it('refuses the Azure report when its chip is not listed, naming the chip and the list', () => {
      const res = verify(azure, { acceptedChipIDs: [goSevGuestChip()] });
      expect(failedOf(res)).toEqual(['chip-id-allowed']);
      expect(detailOf(res, 'chip-id-allowed')).toBe(
        `chip_id ${AZURE_CHIP} is not in the allowlist (want one of ${goSevGuestChip().slice(0, 16)}…)`,
      );
      expect(failedOf(verify(azure, { acceptedChipIDs: [goSevGuestChip(), AZURE_CHIP] }))).toEqual([]);
    });

    it('refuses a VLEK report (chip ID zero) whenever an allowlist is set', () => {
      const res = verify(aws, { acceptedChipIDs: [AZURE_CHIP] });
      expect(failedOf(res)).toEqual(['chip-id-allowed']);
      expect(detailOf(res, 'chip-id-allowed')).toBe(
        'chip_id is masked or zero (signer VLEK), want one of 9e44aaef02cfca6f…',
      );
    });

    it('refuses a malformed list at parse time', () => {
      for (const bad of [[], ['abcd'], 'not-a-list'])
        expect(() => verify(azure, { acceptedChipIDs: bad })).toThrow(/acceptedChipIDs/);
    });
  });

  describe('reportSigner', () => {
    it('"VCEK" refuses the VLEK-signed AWS report; "VLEK" refuses the VCEK-signed Azure report', () => {
      const vcekOnly = verify(aws, { reportSigner: 'VCEK' });
      expect(failedOf(vcekOnly)).toEqual(['signing-key']);
      expect(detailOf(vcekOnly, 'signing-key')).toBe('report signed by the VLEK, policy allows VCEK only');
      const vlekOnly = verify(azure, { reportSigner: 'VLEK' });
      expect(failedOf(vlekOnly)).toEqual(['signing-key']);
      expect(detailOf(vlekOnly, 'signing-key')).toBe('report signed by the VCEK, policy allows VLEK only');
      expect(failedOf(verify(aws, { reportSigner: 'any' }))).toEqual([]);
      expect(failedOf(verify(aws, { reportSigner: 'vlek' }))).toEqual([]);
    });

    it('refuses an unknown value', () => {
      expect(() => verify(aws, { reportSigner: 'both' })).toThrow(
        /reportSigner: want "VCEK", "VLEK" or "any", got "both"/,
      );
    });
  });

  describe('TCB floors: launch (the four version fields), committed and reported, each on its own', () => {
    it('minimumCommittedTCB above the committed TCB refuses the AWS report', () => {
      const res = verify(aws, {
        minimumCommittedTCB: { bootloaderVersion: 4, teeVersion: 0, snpVersion: 24, microcodeVersion: 220 },
      });
      expect(failedOf(res)).toEqual(['minimum-committed-tcb']);
      expect(detailOf(res, 'minimum-committed-tcb')).toBe(
        'committed TCB bl=4 tee=0 snp=24 ucode=219 is below the minimum bl=4 tee=0 snp=24 ucode=220 (short: microcode 219 < 220 (by 1))',
      );
    });

    it('a launch floor of microcode 220 refuses it (launch TCB 219)', () => {
      const res = verify(aws, { microcodeVersion: 220 });
      expect(failedOf(res)).toEqual(['minimum-launch-tcb']);
      expect(detailOf(res, 'minimum-launch-tcb')).toBe(
        'launch TCB bl=4 tee=0 snp=24 ucode=219 is below the minimum bl=4 tee=0 snp=24 ucode=220 (short: microcode 219 < 220 (by 1))',
      );
    });

    it('minimumReportedTCB of microcode 218 refuses it (reported 217) while launch and committed pass', () => {
      const res = verify(aws, {
        minimumReportedTCB: { bootloaderVersion: 4, teeVersion: 0, snpVersion: 24, microcodeVersion: 218 },
      });
      expect(failedOf(res)).toEqual(['minimum-tcb']);
      expect(detailOf(res, 'minimum-tcb')).toBe(
        'reported TCB bl=4 tee=0 snp=24 ucode=217 is below the minimum bl=4 tee=0 snp=24 ucode=218 (short: microcode 217 < 218 (by 1))',
      );
    });

    it('refuses a TCB object with a missing or unknown component', () => {
      expect(() =>
        verify(aws, { minimumCommittedTCB: { bootloaderVersion: 4, teeVersion: 0, snpVersion: 24 } }),
      ).toThrow(/minimumCommittedTCB\.microcodeVersion: want an integer 0…255, got undefined/);
      expect(() => verify(aws, { minimumReportedTCB: { fmc: 1 } })).toThrow(
        /minimumReportedTCB\.fmc: unknown field/,
      );
    });
  });

  describe('minimum mitigation vectors (report version 5 fields)', () => {
    it('refuse the real version-3 AWS report, which carries none', () => {
      const res = verify(aws, { minimumLaunchMitigationVector: '0x1', minimumCurrentMitigationVector: 3 });
      expect(failedOf(res)).toEqual(['minimum-launch-mitigations', 'minimum-current-mitigations']);
      expect(detailOf(res, 'minimum-launch-mitigations')).toBe(
        'want launch mitigation vector with bits 0x1, but report version 3 carries none (version ≥ 5 does)',
      );
      expect(detailOf(res, 'minimum-current-mitigations')).toBe(
        'want current mitigation vector with bits 0x3, but report version 3 carries none (version ≥ 5 does)',
      );
    });

    it('refuse a bad value at parse time', () => {
      for (const bad of [-1, '5', '0x', `0x${'f'.repeat(17)}`, 1.5])
        expect(() => verify(aws, { minimumLaunchMitigationVector: bad })).toThrow(
          /minimumLaunchMitigationVector: want a bit mask/,
        );
    });
  });

  describe('productPolicy', () => {
    it('Milan is accepted with a warning by default', () => {
      const res = verify(azure);
      expect(failedOf(res)).toEqual([]);
      expect(res.warnings).toEqual([
        'Milan reports are accepted with a warning by policy (productPolicy "milan": "warn")',
      ]);
    });

    it('"refuse" refuses the real Milan reports, naming the product and the setting', () => {
      for (const v of [azure, aws]) {
        const res = verify(v, { productPolicy: { milan: 'refuse' } });
        expect(failedOf(res)).toEqual(['product-policy']);
        expect(detailOf(res, 'product-policy')).toBe(
          'Milan reports are refused by policy (productPolicy "milan": "refuse")',
        );
      }
      const accepted = verify(azure, { productPolicy: { milan: 'accept' } });
      expect(failedOf(accepted)).toEqual([]);
      expect(accepted.warnings).toEqual([]);
    });

    it('refuses an unknown product or action', () => {
      expect(() => verify(azure, { productPolicy: { naples: 'refuse' } })).toThrow(
        /productPolicy\.naples: unknown product/,
      );
      expect(() => verify(azure, { productPolicy: { milan: 'block' } })).toThrow(
        /productPolicy\.milan: want one of accept, warn, refuse, got "block"/,
      );
    });
  });

  describe('amdCRL', () => {
    it('defaults to enforce; "off" turns it off; anything else is refused', () => {
      const parse = (f: Record<string, unknown>) =>
        parseSnpConfig('aws-sev-snp', { ...aws.tcb, amdRootKey: ark(), ...f }, new Map()).policy;
      expect(parse({}).checkRevocation).toBe(true);
      expect(parse({ amdCRL: 'off' }).checkRevocation).toBe(false);
      const err = (() => {
        try {
          parse({ amdCRL: 'warn' });
        } catch (e) {
          return e;
        }
      })();
      expect(isConfbootError(err) && err.code).toBe('invalid-argument');
      expect((err as Error).message).toMatch(/amdCRL: want "enforce" or "off", got "warn"/);
    });
  });
});

describe('mitigation vectors on FAKE-hierarchy version-5 reports (no real v5 report exists)', () => {
  let pki: FakeAmdPki;
  beforeAll(async () => {
    pki = await createFakeAmdPki();
  }, 30_000);
  const at = new Date('2026-01-01T00:00:00Z');

  function verifyFake(launch: bigint, current: bigint, fields: Record<string, unknown>): SnpVerification {
    const report = buildFakeReport(pki, { version: 5, launchMitVector: launch, currentMitVector: current });
    const { policy } = parseSnpConfig(
      'gcp-sev-snp',
      {
        bootloaderVersion: pki.tcb.bl,
        teeVersion: pki.tcb.tee,
        snpVersion: pki.tcb.snp,
        microcodeVersion: pki.tcb.ucode,
        amdRootKey: pki.arkPem,
        ...fields,
      },
      new Map(),
    );
    return verifySnpReport(report, pki.vcekPem, { ask: pki.askPem }, policy, at);
  }

  it('accepts vectors holding the required bits and refuses those lacking some, naming them', () => {
    const fields = { minimumLaunchMitigationVector: '0x5', minimumCurrentMitigationVector: '0x4' };
    expect(failedOf(verifyFake(0x7n, 0x4n, fields))).toEqual([]);
    const res = verifyFake(0x4n, 0x0n, fields);
    expect(failedOf(res)).toEqual(['minimum-launch-mitigations', 'minimum-current-mitigations']);
    expect(detailOf(res, 'minimum-launch-mitigations')).toBe(
      'launch mitigation vector 0x4 lacks bits 0x1 of the required 0x5',
    );
    expect(detailOf(res, 'minimum-current-mitigations')).toBe(
      'current mitigation vector 0x0 lacks bits 0x4 of the required 0x4',
    );
  });
});
