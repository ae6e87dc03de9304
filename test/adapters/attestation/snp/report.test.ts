/**
 * parseSnpReport on the REAL SEV-SNP reports in ../shared/testvectors, field by field against
 * snp_reports_expected.json (decoded there independently), plus truncated and unsupported inputs.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeTcb,
  formatTcb,
  parseSnpReport,
  productFromCpuid,
  SNP_REPORT_SIZE,
  tcbAtLeast,
  tcbEqual,
  tcbShortfall,
} from '../../../../src/adapters/attestation/snp/report.js';
import { describeVectors, HAVE_VECTORS, vec, vecB64 } from './vectors.js';

interface ExpectedTcb {
  bl: number;
  tee: number;
  snp: number;
  ucode: number;
  raw: string;
}
interface ExpectedReport {
  length: number;
  version: number;
  guest_svn: number;
  policy: string;
  vmpl: number;
  current_tcb: ExpectedTcb;
  reported_tcb: ExpectedTcb;
  committed_tcb: ExpectedTcb;
  launch_tcb: ExpectedTcb;
  platform_info: string;
  report_data: string;
  measurement: string;
  host_data: string;
  id_key_digest: string;
  report_id: string;
  chip_id: string;
  cpuid_fam_mod_step: string;
  current_version: string;
  committed_version: string;
  policy_decoded: {
    abi_minor: number;
    abi_major: number;
    smt: boolean;
    debug: boolean;
    single_socket: boolean;
  };
  signer_info_decoded: { signing_key: number };
}

const expected: [string, ExpectedReport][] = HAVE_VECTORS
  ? Object.entries(
      (
        JSON.parse(vec('snp_reports_expected.json').toString('utf8')) as {
          reports: Record<string, ExpectedReport>;
        }
      ).reports,
    ).filter(([file]) => !file.startsWith('derived:'))
  : [];
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const tcb = (t: { bl: number; tee: number; snp: number; ucode: number; raw: bigint }) => ({
  bl: t.bl,
  tee: t.tee,
  snp: t.snp,
  ucode: t.ucode,
  raw: t.raw.toString(),
});
const version = (v: { major: number; minor: number; build: number }) => `${v.major}.${v.minor}.${v.build}`;

describeVectors('parseSnpReport on REAL reports', () => {
  it('has reports to check', () => {
    expect(expected.length).toBeGreaterThanOrEqual(4);
  });

  it.each(expected)('%s decodes as expected', (file, want) => {
    const input = file.endsWith('.txt') ? vecB64(file) : vec(file);
    expect(input.length).toBe(want.length);
    const r = parseSnpReport(input);
    expect(r.trailingBytes).toBe(want.length - SNP_REPORT_SIZE);
    expect([r.version, r.guestSvn, r.vmpl]).toEqual([want.version, want.guest_svn, want.vmpl]);
    expect(`0x${r.policy.raw.toString(16)}`).toBe(want.policy);
    expect({
      abi_minor: r.policy.abiMinor,
      abi_major: r.policy.abiMajor,
      smt: r.policy.smt,
      debug: r.policy.debug,
      single_socket: r.policy.singleSocket,
    }).toEqual({
      abi_minor: want.policy_decoded.abi_minor,
      abi_major: want.policy_decoded.abi_major,
      smt: want.policy_decoded.smt,
      debug: want.policy_decoded.debug,
      single_socket: want.policy_decoded.single_socket,
    });
    expect([tcb(r.currentTcb), tcb(r.reportedTcb), tcb(r.committedTcb), tcb(r.launchTcb)]).toEqual([
      want.current_tcb,
      want.reported_tcb,
      want.committed_tcb,
      want.launch_tcb,
    ]);
    expect(`0x${r.platformInfo.toString(16)}`).toBe(want.platform_info);
    expect(hex(r.reportData)).toBe(want.report_data);
    expect(hex(r.measurement)).toBe(want.measurement);
    expect(hex(r.hostData)).toBe(want.host_data);
    expect(hex(r.idKeyDigest)).toBe(want.id_key_digest);
    expect(hex(r.reportId)).toBe(want.report_id);
    expect(hex(r.chipId)).toBe(want.chip_id);
    expect(Buffer.from([r.cpuid.family, r.cpuid.model, r.cpuid.stepping]).toString('hex')).toBe(
      want.cpuid_fam_mod_step,
    );
    expect([version(r.currentVersion), version(r.committedVersion)]).toEqual([
      want.current_version,
      want.committed_version,
    ]);
    expect(r.signerInfo.signingKey).toBe(want.signer_info_decoded.signing_key === 1 ? 'vlek' : 'vcek');
    expect(r.signedBytes).toHaveLength(0x2a0);
    expect(r.signatureHasHighBytes).toBe(false);
  });

  it('refuses a truncated report and an unsupported version', () => {
    const [file] = expected[0] as [string, ExpectedReport];
    const input = file.endsWith('.txt') ? vecB64(file) : vec(file);
    expect(() => parseSnpReport(input.subarray(0, SNP_REPORT_SIZE - 1))).toThrow(
      `SEV-SNP report is ${SNP_REPORT_SIZE - 1} bytes, want at least ${SNP_REPORT_SIZE}`,
    );
    const v1 = Buffer.from(input);
    v1.writeUInt32LE(1, 0);
    expect(() => parseSnpReport(v1)).toThrow('SEV-SNP report version 1 is not supported (want 2 to 5)');
  });
});

describe('SEV-SNP TCB versions', () => {
  it('decodes the Milan/Genoa and the Turin byte layouts', () => {
    const milan = decodeTcb(0xd9_18_00_00_00_00_00_04n, 'milan');
    expect([milan.bl, milan.tee, milan.snp, milan.ucode]).toEqual([4, 0, 0x18, 0xd9]);
    const turin = decodeTcb(0xd9_00_00_00_18_00_04_01n, 'turin');
    expect([turin.fmc, turin.bl, turin.tee, turin.snp, turin.ucode]).toEqual([1, 4, 0, 0x18, 0xd9]);
    expect(decodeTcb(0xd9_18_00_00_00_00_00_04n, 'genoa')).toEqual(milan);
    expect(milan.raw).toBe(0xd9_18_00_00_00_00_00_04n);
  });

  it('compares TCBs part by part and names what falls short', () => {
    const floor = { bl: 3, tee: 0, snp: 20, ucode: 200 };
    const good = { bl: 4, tee: 0, snp: 24, ucode: 217 };
    expect(tcbAtLeast(good, floor)).toBe(true);
    const old = { ...good, snp: 8 };
    expect(tcbAtLeast(old, floor)).toBe(false);
    expect(tcbShortfall(old, floor)).toBe('SNP firmware 8 < 20 (by 12)');
    expect(tcbShortfall({ ...old, ucode: 199 }, floor)).toBe(
      'SNP firmware 8 < 20 (by 12), microcode 199 < 200 (by 1)',
    );
    expect(tcbShortfall(good, floor)).toBe('');
    expect(tcbEqual(good, { ...good })).toBe(true);
    expect(tcbEqual(good, old)).toBe(false);
    expect(formatTcb(good)).toBe('bl=4 tee=0 snp=24 ucode=217');
    expect(formatTcb({ ...good, fmc: 1 })).toBe('fmc=1 bl=4 tee=0 snp=24 ucode=217');
  });

  it('tells the product from a version-3 CPUID', () => {
    expect(productFromCpuid({ family: 0x19, model: 0x01, stepping: 1 })).toBe('milan');
    expect(productFromCpuid({ family: 0x19, model: 0x11, stepping: 0 })).toBe('genoa');
    expect(productFromCpuid({ family: 0x19, model: 0xa0, stepping: 0 })).toBe('genoa');
    expect(productFromCpuid({ family: 0x1a, model: 0x02, stepping: 0 })).toBe('turin');
    expect(productFromCpuid({ family: 0, model: 0, stepping: 0 })).toBeUndefined();
    expect(productFromCpuid({ family: 0x19, model: 0x30, stepping: 0 })).toBeUndefined();
  });
});
