/**
 * The steps the SEV-SNP and TDX validators share after their hardware half (cvm-checks.ts): the
 * vTPM quote is asked for with nonce SHA256(InstanceInfo ‖ extraData) and the trusted AK, its
 * rejection keeps the checks made so far, and warn-only measurement mismatches come back as warnings. The vTPM verifier
 * here is a recording stub (the real one is exercised by the validators' own tests).
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import { verifyVtpmHalf } from '../../../../src/adapters/attestation/shared/cvm-checks.js';
import type {
  VerifyVtpmQuote,
  VtpmDocument,
} from '../../../../src/adapters/attestation/shared/cvm-document.js';
import { AttestationError } from '../../../../src/ports/errors.js';
import type { MeasurementPolicy } from '../../../../src/ports/measurement-policy.js';
import type { AttestationCheck } from '../../../../src/ports/types.js';

const OP = 'validating test attestation';
const trustedAk = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
const doc: VtpmDocument = {
  attestation: {
    akPub: new Uint8Array([1]),
    quotes: [],
    eventLog: new Uint8Array(0),
    akCert: new Uint8Array(0),
    intermediateCerts: [],
  },
  akPub: new Uint8Array([1]),
  instanceInfo: Buffer.from('{"x":1}'),
  userData: Buffer.from('user data'),
};
const extraData = new Uint8Array(32).fill(7);
const PCR4 = new Uint8Array(32).fill(4);

/** Expects PCR 4 = `want`; `warnOnly` marks its mismatch warn-only. */
function pcr4Policy(want: Uint8Array, warnOnly: boolean): MeasurementPolicy {
  return {
    compare: (actual) =>
      Buffer.from(actual.get(4) ?? []).equals(Buffer.from(want))
        ? []
        : [{ index: 4, expected: want, actual: actual.get(4), warnOnly }],
  };
}

async function caught(p: Promise<unknown>): Promise<AttestationError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AttestationError);
  return err as AttestationError;
}

/** A recorder for OP holding `checks`. */
function recorder(checks: AttestationCheck[]): CheckRecorder {
  const rec = new CheckRecorder(OP);
  rec.adopt(checks);
  return rec;
}

describe('verifyVtpmHalf', () => {
  it('asks the vTPM verifier with nonce SHA256(InstanceInfo ‖ extraData) and the trusted AK', async () => {
    const calls: Array<{ nonce: Uint8Array; trustedAk: unknown }> = [];
    const verifyVtpmQuote: VerifyVtpmQuote = async (_att, expected) => {
      calls.push(expected);
      return { pcrs: new Map([[4, PCR4]]), checks: [{ name: 'tpm-quote', ok: true, detail: 'ok' }] };
    };
    const checks: AttestationCheck[] = [{ name: 'hardware', ok: true, detail: 'ok' }];
    const res = await verifyVtpmHalf(
      { verifyVtpmQuote, doc, extraData, trustedAk, measurements: pcr4Policy(PCR4, false) },
      recorder(checks),
    );
    const nonce = createHash('sha256').update(doc.instanceInfo).update(extraData).digest();
    expect(calls).toHaveLength(1);
    expect(Buffer.from(calls[0]?.nonce ?? []).equals(nonce)).toBe(true);
    expect(calls[0]?.trustedAk).toBe(trustedAk);
    expect(res.userData).toBe(doc.userData);
    expect(res.warnings).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(['hardware', 'tpm-quote', 'measurements']);
  });

  it('keeps the checks made so far when the vTPM verifier rejects', async () => {
    const verifyVtpmQuote: VerifyVtpmQuote = async () => {
      throw new AttestationError('tpm-quote', 'quote signature invalid', {
        checks: [{ name: 'tpm-quote', ok: false, detail: 'signature' }],
      });
    };
    const err = await caught(
      verifyVtpmHalf(
        { verifyVtpmQuote, doc, extraData, trustedAk, measurements: pcr4Policy(PCR4, false) },
        recorder([{ name: 'hardware', ok: true, detail: 'ok' }]),
      ),
    );
    expect(err.check).toBe('tpm-quote');
    expect(err.checks.map((c) => c.name)).toEqual(['hardware', 'tpm-quote']);
  });

  it('refuses an enforced mismatch and returns a warn-only one as a warning', async () => {
    const verifyVtpmQuote: VerifyVtpmQuote = async () => ({ pcrs: new Map([[4, PCR4]]), checks: [] });
    const other = new Uint8Array(32);
    const err = await caught(
      verifyVtpmHalf(
        { verifyVtpmQuote, doc, extraData, trustedAk, measurements: pcr4Policy(other, false) },
        recorder([]),
      ),
    );
    expect(err.check).toBe('measurements');
    expect(err.message).toMatch(
      /^validating test attestation: measurement validation failed: PCR4: expected (00){32}, got (04){32}$/,
    );
    expect(err.mismatches.map((m) => m.index)).toEqual([4]);

    const res = await verifyVtpmHalf(
      { verifyVtpmQuote, doc, extraData, trustedAk, measurements: pcr4Policy(other, true) },
      recorder([]),
    );
    expect(res.warnings.map((m) => m.index)).toEqual([4]);
    expect(res.checks).toEqual([expect.objectContaining({ name: 'measurements', ok: true })]);
  });
});
