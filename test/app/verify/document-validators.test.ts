/**
 * confboot/verify's validators of whole node documents (src/app/verify/document-validators.ts):
 *  - each variant's OID equals the variant registry's (the services' source of OIDs);
 *  - a qemu-vtpm document from a SOFT TPM (no hardware here) is accepted with the AK the caller
 *    pins, refused with another AK, and the AK trust is required;
 *  - gcp-sev-es (a soft TPM holding the PCRs of a REAL GCE event log) is accepted through the caller's
 *    own STUB shielded-identity lookup (GCE cannot exist here) and through a pinned AK, and refused
 *    when the lookup names another key;
 *  - aws-sev-snp end to end: a soft TPM's quote and a report from a FAKE AMD hierarchy binding its AK,
 *    verified offline from the attestation config alone (no AMD KDS); without the ASVK in the config
 *    the document is refused because no fetcher was given, not fetched.
 */
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseEventLog, replayEventLog } from '../../../src/adapters/attestation/eventlog/tcg-log.js';
import { variantNames, variantOid } from '../../../src/app/registry/index.js';
import { DOCUMENT_VARIANT_OIDS, DOCUMENT_VARIANTS } from '../../../src/app/verify/document-validators.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { verifyAttestation } from '../../../src/verify.js';
import {
  buildFakeReport,
  createFakeAmdPki,
  type FakeAmdPki,
} from '../../adapters/attestation/snp/fake-amd-pki.js';
import { describeVectors, vec } from '../../adapters/attestation/snp/vectors.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';

const ZERO32 = '00'.repeat(32);
const MEASUREMENTS = JSON.stringify({ measurements: { 4: ZERO32, 15: ZERO32 } });
const nonce = Buffer.alloc(32, 7);
const userData = createHash('sha256').update('tls key').digest();

describe('confboot/verify document validators', () => {
  it('cover every variant of the registry, each under the OID the registry declares', () => {
    expect([...DOCUMENT_VARIANTS].sort()).toEqual([...variantNames()].sort());
    for (const v of DOCUMENT_VARIANTS) expect(DOCUMENT_VARIANT_OIDS[v], v).toBe(variantOid(v));
  });

  describe('qemu-vtpm (soft TPM)', () => {
    const tpm = SoftTpm.create();
    const issue = () => new SoftVtpmIssuer(tpm, 'qemu-vtpm').issue(userData, nonce);

    it('accepts the document with the pinned AK and returns the bound user data', async () => {
      const r = await verifyAttestation({
        kind: 'document',
        variant: 'qemu-vtpm',
        document: await issue(),
        nonce,
        trustedAk: tpm.akPublicKeyPem(),
        attestationConfig: MEASUREMENTS,
      });
      expect(r.checks.filter((c) => !c.ok)).toEqual([]);
      expect(r.accepted).toBe(true);
      expect(Buffer.from(r.userData ?? []).equals(userData)).toBe(true);
    });

    it('refuses it with another pinned AK, another nonce, or a PCR the config does not expect', async () => {
      const document = await issue();
      const base = {
        kind: 'document' as const,
        variant: 'qemu-vtpm' as const,
        document,
        attestationConfig: MEASUREMENTS,
      };
      const otherAk = await verifyAttestation({
        ...base,
        nonce,
        trustedAk: SoftTpm.create().akPublicKeyPem(),
      });
      expect(otherAk).toMatchObject({ accepted: false, failedCheck: 'ak-trust' });
      const otherNonce = await verifyAttestation({
        ...base,
        nonce: Buffer.alloc(32, 8),
        trustedAk: tpm.akPublicKeyPem(),
      });
      expect(otherNonce.accepted).toBe(false);
      const strict = JSON.stringify({ measurements: { 4: '11'.repeat(32), 15: ZERO32 } });
      const mismatch = await verifyAttestation({
        ...base,
        nonce,
        trustedAk: tpm.akPublicKeyPem(),
        attestationConfig: strict,
      });
      expect(mismatch).toMatchObject({ accepted: false, failedCheck: 'measurements' });
      expect(mismatch.mismatches.map((m) => m.index)).toEqual([4]);
    });

    it('needs AK trust: a pinned AK, registered AKs, or the explicit trustAkAsCarried', async () => {
      const document = await issue();
      const err = await verifyAttestation({
        kind: 'document',
        variant: 'qemu-vtpm',
        document,
        nonce,
        attestationConfig: MEASUREMENTS,
      }).catch((e: unknown) => e);
      expect(isConfbootError(err) && err.message).toMatch(
        /trustedAk, qemuAkRegistry, or the explicit trustAkAsCarried/,
      );
      const carried = await verifyAttestation({
        kind: 'document',
        variant: 'qemu-vtpm',
        document,
        nonce,
        attestationConfig: MEASUREMENTS,
        trustAkAsCarried: true,
      });
      expect(carried.accepted).toBe(true);
    });
  });

  describeVectors(
    'gcp-sev-es (soft TPM with the PCRs of a REAL GCE event log, STUB shielded-identity lookup)',
    () => {
      const log = () => vec('go-tpm-tools/eventlogs/cos-85-amd-sev.bin');
      const tpm = SoftTpm.create();
      beforeAll(() => {
        const replayed = replayEventLog(parseEventLog(log())).get(SHA256) as Map<number, Uint8Array>;
        for (const [i, v] of replayed) tpm.setPcr(SHA256, i, v);
      });
      const instanceInfo = Buffer.from(
        JSON.stringify({ zone: 'europe-west3-a', project_id: 'p', instance_name: 'node-1' }),
      );
      const issue = () =>
        new SoftVtpmIssuer(tpm, 'gcp-sev-es', { instanceInfo, eventLog: log() }).issue(userData, nonce);
      const anyPcrs = { compare: () => [] };
      const base = async () => ({
        kind: 'document' as const,
        variant: 'gcp-sev-es' as const,
        document: await issue(),
        nonce,
        policy: anyPcrs,
      });

      it("accepts the document through the caller's lookup and through a pinned AK", async () => {
        const asked: string[] = [];
        const gceShieldedIdentity = {
          signingKeyPem: async (project: string, zone: string, name: string) => {
            asked.push(`${project}/${zone}/${name}`);
            return tpm.akPublicKeyPem();
          },
        };
        const viaLookup = await verifyAttestation({ ...(await base()), gceShieldedIdentity });
        expect(viaLookup.checks.filter((c) => !c.ok)).toEqual([]);
        expect(asked).toEqual(['p/europe-west3-a/node-1']);
        expect(
          (await verifyAttestation({ ...(await base()), trustedAk: tpm.akPublicKeyPem() })).accepted,
        ).toBe(true);
      });

      it('refuses it when the lookup names another key', async () => {
        const other = SoftTpm.create().akPublicKeyPem();
        const r = await verifyAttestation({
          ...(await base()),
          gceShieldedIdentity: { signingKeyPem: async () => other },
        });
        expect(r).toMatchObject({ accepted: false, failedCheck: 'ak-trust' });
      });
    },
  );

  describe('aws-sev-snp (soft TPM, FAKE AMD hierarchy), offline', () => {
    let pki: FakeAmdPki;
    beforeAll(async () => {
      pki = await createFakeAmdPki();
    }, 30_000);
    const config = (extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        measurements: { 4: ZERO32, 15: ZERO32 },
        bootloaderVersion: pki.tcb.bl,
        teeVersion: pki.tcb.tee,
        snpVersion: pki.tcb.snp,
        microcodeVersion: pki.tcb.ucode,
        amdRootKey: pki.arkPem,
        amdCRL: 'off',
        ...extra,
      });
    const issue = (tpm: SoftTpm) => {
      const report = buildFakeReport(pki, {
        signingKey: 'vlek',
        reportData: createHash('sha512').update(tpm.akPublicKeySpki()).digest(),
      });
      const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');
      const instanceInfo = Buffer.from(
        JSON.stringify({
          ReportSigner: b64(pki.vlekPem),
          AttestationReport: b64(report),
          Azure: null,
          GCP: null,
        }),
      );
      return new SoftVtpmIssuer(tpm, 'aws-sev-snp', { instanceInfo }).issue(userData, nonce);
    };

    it('accepts the document with the ASVK from the config, making no request', async () => {
      const r = await verifyAttestation({
        kind: 'document',
        variant: 'aws-sev-snp',
        document: await issue(SoftTpm.create()),
        nonce,
        attestationConfig: config({ amdSigningKey: pki.asvkPem }),
        at: new Date('2026-01-01T00:00:00Z'),
      });
      expect(r.checks.filter((c) => !c.ok)).toEqual([]);
      expect(r.accepted).toBe(true);
      expect(r.checks.map((c) => c.name)).toEqual(
        expect.arrayContaining(['report-signature', 'quote-signature']),
      );
    });

    it('refuses it when the ASVK is neither carried nor configured and no fetcher is given', async () => {
      const r = await verifyAttestation({
        kind: 'document',
        variant: 'aws-sev-snp',
        document: await issue(SoftTpm.create()),
        nonce,
        attestationConfig: config(),
        at: new Date('2026-01-01T00:00:00Z'),
      });
      expect(r.accepted).toBe(false);
      expect(r).toMatchObject({
        failedCheck: 'ask-signature',
        reason: expect.stringMatching(/no ASK\/ASVK supplied/),
      });
    });
  });
});
