/**
 * aws-nitro-tpm with AWS's signed NitroTPM document: a REAL swtpm quotes (SHA-256 and SHA-384) with
 * the real issuer; the Nitro system and its PKI are FAKE (test/support/fake-nitro-pki.ts: AWS's
 * cannot exist here, so the validator pins the fake root), EC2 is a FAKE lookup. The real
 * document captured on EC2 is covered in shared/nitrotpm-document.test.ts.
 *
 * The attacks: a software TPM extended to the right values (no AWS document: refused, where upstream
 * trusted the AK "as carried"), AWS's document for another AK, for another nonce, with other PCRs,
 * signed by an unpinned PKI, or judged after its certificates expired.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAwsNitroTpmIssuer,
  NITROTPM_DOCUMENT_FIELD,
  publicKeyIsAk,
} from '../../../../src/adapters/attestation/variants/aws-nitro-tpm.js';
import { VtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { type SwtpmInstance, startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { createValidator, type ValidatorConfig } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import type { AmiTpmSupport } from '../../../../src/ports/ami-tpm-support.js';
import type { Validator } from '../../../../src/ports/validator.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import {
  createFakeNitroPki,
  type FakeNitroDocumentInput,
  type FakeNitroPki,
  FakeNitroTpmAttestor,
} from '../../../support/fake-nitro-pki.js';
import { SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

const IDENTITY = {
  region: 'eu-central-1',
  imageId: 'ami-0123456789abcdef0',
  instanceId: 'i-0abc',
  accountId: '1',
};
const policy = new MeasurementsPolicy(new Map([[15, { expected: Buffer.alloc(32), warnOnly: false }]]));
const userData = createHash('sha256').update('tls spki').digest();

/** FAKE EC2: every AMI has TpmSupport v2.0; lookups counted. */
const ec2 = {
  calls: 0,
  async tpmSupport() {
    ec2.calls++;
    return 'v2.0';
  },
} satisfies AmiTpmSupport & { calls: number };

let swtpm: SwtpmInstance;
let tpm: Tpm2ToolsTpm;
let pki: FakeNitroPki;
let otherPki: FakeNitroPki;

beforeAll(async () => {
  swtpm = await startSwtpm();
  tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  pki = await createFakeNitroPki();
  otherPki = await createFakeNitroPki();
}, 60_000);
afterAll(() => swtpm?.stop());

/** The Nitro system's view of the swtpm's SHA-384 PCRs. */
const sha384Pcrs = async () => (await tpm.quoteBank('sha384', randomBytes(32))).pcrs;

/** The real aws-nitro-tpm issuer on the swtpm, its FAKE Nitro system editing documents with `edit`. */
function issuer(edit?: (i: FakeNitroDocumentInput) => FakeNitroDocumentInput) {
  const nitroTpm = new FakeNitroTpmAttestor(pki, sha384Pcrs, edit);
  return {
    nitroTpm,
    issuer: createAwsNitroTpmIssuer({
      oid: variantOid('aws-nitro-tpm'),
      tpm,
      instanceIdentity: async () => new TextEncoder().encode(JSON.stringify(IDENTITY)),
      nitroTpm,
    }),
  };
}

function validator(config: Partial<ValidatorConfig> = {}): Validator {
  return createValidator('aws-nitro-tpm', {
    policy,
    amiTpmSupport: ec2,
    nitroTpmTrust: { rootSha256: [pki.rootSha256] },
    clock: { now: () => pki.validAt },
    ...config,
  });
}

const rejection = async (p: Promise<unknown>) => (await attestationRejection(p)).error;

describe('aws-nitro-tpm: the attestation key is trusted because AWS signed it (REAL swtpm, FAKE Nitro PKI, FAKE EC2)', () => {
  it('accepts an honest instance: AWS document verified, its public_key is the AK, its PCRs are the quoted SHA-384 ones', async () => {
    const { issuer: honest, nitroTpm } = issuer();
    const nonce = randomBytes(32);
    const before = ec2.calls;
    const res = await validator().validate(await honest.issue(userData, nonce), nonce);
    const checks = new Map(res.checks.map((c) => [c.name, c.detail ?? '']));
    for (const name of ['nitrotpm-format', 'nitrotpm-signature', 'nitrotpm-certificate', 'nitrotpm-nonce'])
      expect(checks.has(name)).toBe(true);
    expect(checks.get('ak-trust')).toMatch(/public_key AWS signed for i-0fake/);
    expect(checks.get('nitrotpm-pcrs')).toMatch(/^24 quoted SHA-384 PCRs equal/);
    expect(checks.get('cvm')).toMatch(/TpmSupport v2.0/);
    expect(ec2.calls).toBe(before + 1);
    // The request bound the session (extraData) and the AK's SubjectPublicKeyInfo.
    const request = nitroTpm.requests[0];
    expect(
      Buffer.from(request?.nonce ?? []).equals(createHash('sha256').update(userData).update(nonce).digest()),
    ).toBe(true);
    expect(request?.publicKey.length).toBe(294);
  });

  it('refuses a software TPM with the right PCRs but no AWS document (upstream trusted it "as carried")', async () => {
    const soft = new SoftVtpmIssuer(SoftTpm.create(), 'aws-nitro-tpm', {
      instanceInfo: new TextEncoder().encode(JSON.stringify(IDENTITY)),
    });
    const nonce = randomBytes(32);
    const before = ec2.calls;
    const err = await rejection(validator().validate(await soft.issue(userData, nonce), nonce));
    expect([err.check, err.message]).toEqual([
      'ak-trust',
      expect.stringMatching(/no NitroTPM attestation document/),
    ]);
    expect(ec2.calls).toBe(before);
  });

  it('with the documented trustCarriedAk opt-in, the same software TPM passes (upstream behaviour, off by default)', async () => {
    const soft = new SoftVtpmIssuer(SoftTpm.create(), 'aws-nitro-tpm', {
      instanceInfo: new TextEncoder().encode(JSON.stringify(IDENTITY)),
    });
    const nonce = randomBytes(32);
    const res = await validator({
      nitroTpmTrust: { rootSha256: [pki.rootSha256], trustCarriedAk: true },
    }).validate(await soft.issue(userData, nonce), nonce);
    expect(res.checks.find((c) => c.name === 'ak-trust')?.detail).toMatch(/trustCarriedAk opt-in/);
  });

  it("refuses AWS's document when its public_key is another key (a genuine document replayed for a software AK)", async () => {
    const other = SoftTpm.create();
    const otherSpki = other.akPublicKeySpki();
    const { issuer: swapped } = issuer((i) => ({ ...i, publicKey: otherSpki }));
    const nonce = randomBytes(32);
    const err = await rejection(validator().validate(await swapped.issue(userData, nonce), nonce));
    expect([err.check, err.message]).toEqual([
      'ak-trust',
      expect.stringMatching(/public_key is not the attestation key/),
    ]);
  });

  it("refuses AWS's document for another nonce (another session's document)", async () => {
    const { issuer: stale } = issuer((i) => ({ ...i, nonce: randomBytes(32) }));
    const nonce = randomBytes(32);
    expect((await rejection(validator().validate(await stale.issue(userData, nonce), nonce))).check).toBe(
      'nitrotpm-nonce',
    );
  });

  it('refuses when the quoted SHA-384 PCRs differ from the ones AWS signed', async () => {
    const { issuer: lying } = issuer((i) => {
      const pcrs = new Map(i.pcrs);
      pcrs.set(4, new Uint8Array(48).fill(4));
      return { ...i, pcrs };
    });
    const nonce = randomBytes(32);
    const err = await rejection(validator().validate(await lying.issue(userData, nonce), nonce));
    expect([err.check, err.message]).toEqual(['nitrotpm-pcrs', expect.stringMatching(/PCR 4 differs/)]);
  });

  it('refuses a document without a SHA-384 quote', async () => {
    const { nitroTpm } = issuer();
    const full = createAwsNitroTpmIssuer({
      oid: variantOid('aws-nitro-tpm'),
      tpm,
      instanceIdentity: async () => new TextEncoder().encode(JSON.stringify(IDENTITY)),
      nitroTpm,
    });
    // The same instance info (with AWS's document), quoted over SHA-256 only.
    const sha256Only = new VtpmIssuer({
      variant: 'aws-nitro-tpm',
      oid: variantOid('aws-nitro-tpm'),
      tpm,
      instanceInfo: (extraData) => captureInfo(full, extraData),
    });
    const nonce = randomBytes(32);
    const err = await rejection(validator().validate(await sha256Only.issue(userData, nonce), nonce));
    expect([err.check, err.message]).toEqual(['nitrotpm-pcrs', expect.stringMatching(/0 SHA-384 quotes/)]);
  });

  it('refuses a document signed by a PKI whose root is not pinned', async () => {
    const nonce = randomBytes(32);
    const doc = await issuer().issuer.issue(userData, nonce);
    const err = await rejection(
      validator({ nitroTpmTrust: { rootSha256: [otherPki.rootSha256] } }).validate(doc, nonce),
    );
    expect([err.check, err.message]).toEqual([
      'nitrotpm-certificate',
      expect.stringMatching(/not the pinned AWS Nitro root/),
    ]);
  });

  it("refuses a document once the Clock is past its certificates' validity", async () => {
    const nonce = randomBytes(32);
    const doc = await issuer().issuer.issue(userData, nonce);
    const err = await rejection(
      validator({ clock: { now: () => new Date('2041-01-01T00:00:00Z') } }).validate(doc, nonce),
    );
    expect([err.check, err.message]).toEqual([
      'nitrotpm-certificate',
      expect.stringMatching(/is not valid at 2041/),
    ]);
  });

  it("refuses by default with AWS's real root pinned (the fake PKI is not AWS)", async () => {
    const nonce = randomBytes(32);
    const doc = await issuer().issuer.issue(userData, nonce);
    const v = createValidator('aws-nitro-tpm', {
      policy,
      amiTpmSupport: ec2,
      clock: { now: () => pki.validAt },
    });
    expect((await rejection(v.validate(doc, nonce))).check).toBe('nitrotpm-certificate');
  });

  it(`the instance info keeps the IMDS fields and adds ${NITROTPM_DOCUMENT_FIELD} (base64)`, async () => {
    const { issuer: honest } = issuer();
    const info = JSON.parse(
      Buffer.from(await captureInfo(honest, randomBytes(32))).toString('utf8'),
    ) as Record<string, string>;
    expect(info.region).toBe(IDENTITY.region);
    expect(info.imageId).toBe(IDENTITY.imageId);
    expect(Buffer.from(info[NITROTPM_DOCUMENT_FIELD] ?? '', 'base64')[0]).toBe(0x84);
  });
});

/** The instance info `issuer` binds for `extraData` (read back from the document it issues). */
async function captureInfo(issuer: VtpmIssuer, extraData: Uint8Array): Promise<Uint8Array> {
  const provider = (issuer as unknown as { instanceInfo: (e: Uint8Array) => Promise<Uint8Array> })
    .instanceInfo;
  return provider(extraData);
}

describe('public_key against the AK', () => {
  const ecc = SoftTpm.create({ key: 'ecc' });
  const rsa = SoftTpm.create({ key: 'rsa' });
  const eccAk = parseTpmtPublic(ecc.akPublic);
  const rsaAk = parseTpmtPublic(rsa.akPublic);
  /** The uncompressed SEC1 point of an EC SubjectPublicKeyInfo (its last 65 bytes for P-256). */
  const point = (spki: Buffer) => spki.subarray(spki.length - 65);

  it.each([
    ['the SubjectPublicKeyInfo of an RSA AK', () => publicKeyIsAk(rsa.akPublicKeySpki(), rsaAk), true],
    ['the SubjectPublicKeyInfo of an ECC AK', () => publicKeyIsAk(ecc.akPublicKeySpki(), eccAk), true],
    [
      'the uncompressed point of an ECC AK (as vaportpm binds it)',
      () => publicKeyIsAk(point(ecc.akPublicKeySpki()), eccAk),
      true,
    ],
    ['another RSA key', () => publicKeyIsAk(SoftTpm.create().akPublicKeySpki(), rsaAk), false],
    [
      'another ECC point',
      () => publicKeyIsAk(point(SoftTpm.create({ key: 'ecc' }).akPublicKeySpki()), eccAk),
      false,
    ],
    ['an ECC point for an RSA AK', () => publicKeyIsAk(point(ecc.akPublicKeySpki()), rsaAk), false],
    ['a truncated point', () => publicKeyIsAk(point(ecc.akPublicKeySpki()).subarray(0, 64), eccAk), false],
    ['garbage', () => publicKeyIsAk(Uint8Array.of(1, 2, 3), rsaAk), false],
  ] as const)('%s: %s', (_name, check, expected) => {
    expect(check()).toBe(expected);
  });
});
