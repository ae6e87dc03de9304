/**
 * The AK made from an NV key template (src/adapters/tpm/nv-template-ak.ts through Tpm2ToolsTpm), on
 * a REAL swtpm. GCE's provisioning cannot exist here, so it is SIMULATED: the test writes a
 * GCE-style RSA AK template (go-tpm-tools' AKTemplateRSA: restricted RSASSA-SHA256 signing key) into
 * NV index 0x01c10001 of the swtpm, as GCE does on its vTPMs. The expected key is created
 * INDEPENDENTLY of tpm2-tools: a raw TPM2_CreatePrimary with the template's exact bytes, sent over
 * the swtpm socket — primary keys are a function of the hierarchy seed and the template, so both
 * must be the same key, the one GCE would publish as the shielded-identity signing key.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseEventLog } from '../../../src/adapters/attestation/eventlog/tcg-log.js';
import { VtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import {
  GCE_AK_TEMPLATE_NV_INDEX_ECC,
  GCE_AK_TEMPLATE_NV_INDEX_RSA,
  parseAkTemplate,
} from '../../../src/adapters/tpm/nv-template-ak.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { DEFAULT_AK_HANDLE, Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { buildValidator } from '../../../src/app/registry/validators.js';
import { isAttestationError, isConfbootError } from '../../../src/ports/errors.js';
import type { GceShieldedIdentity } from '../../../src/ports/gce-shielded-identity.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { writeNvIndex } from '../../support/azure-hcl.js';
import { useTmpDirs } from '../../support/tmp.js';
import { HAVE_VECTORS, vec } from '../attestation/snp/vectors.js';
import { AK_SIGNER_ATTRIBUTES, eccAkTemplate, rsaAkTemplate } from './ak-template-fixture.js';
import { checkQuote, rsaAkPem, tpm2 } from './tpm-test-helpers.js';

const TPM_RH_OWNER = 0x40000001;
const TPM_RH_ENDORSEMENT = 0x4000000b;
const SIGNER = AK_SIGNER_ATTRIBUTES;
const rsaTemplate = rsaAkTemplate;
const eccTemplate = eccAkTemplate;

/** GCE's RSA AK template as go-tpm-tools' AKTemplateRSA marshals it (empty unique). */
const GCE_RSA_TEMPLATE = rsaTemplate();

/**
 * One raw TPM command over the swtpm's command socket (swtpm speaks plain TPM 2.0 commands there);
 * returns the response after checking its response code is success.
 */
async function rawTpm(sw: SwtpmInstance, command: Buffer): Promise<Buffer> {
  return new Promise((ok, fail) => {
    const sock = connect({ host: sw.host, port: sw.port });
    const chunks: Buffer[] = [];
    let got = 0;
    sock.setTimeout(5000, () => sock.destroy(new Error('raw TPM command timed out')));
    sock.on('connect', () => sock.write(command));
    sock.on('data', (d) => {
      chunks.push(d);
      got += d.length;
      const all = Buffer.concat(chunks);
      if (got >= 10 && got >= all.readUInt32BE(2)) {
        sock.end();
        const rc = all.readUInt32BE(6);
        if (rc !== 0)
          fail(
            new Error(`raw TPM command 0x${command.readUInt32BE(6).toString(16)}: rc 0x${rc.toString(16)}`),
          );
        else ok(all);
      }
    });
    sock.on('error', fail);
  });
}

/** A TPM_ST_SESSIONS command with one handle authorized by the empty password (TPM_RS_PW). */
function sessionCommand(cc: number, handle: number, params: Buffer): Buffer {
  const auth = Buffer.from('40000009' + '0000' + '00' + '0000', 'hex');
  const head = Buffer.alloc(18);
  head.writeUInt16BE(0x8002, 0);
  head.writeUInt32BE(18 + auth.length + params.length, 2);
  head.writeUInt32BE(cc, 6);
  head.writeUInt32BE(handle, 10);
  head.writeUInt32BE(auth.length, 14);
  return Buffer.concat([head, auth, params]);
}

/**
 * INDEPENDENT reference: TPM2_CreatePrimary(hierarchy, template) sent raw, then TPM2_FlushContext.
 * Returns the created key's TPMT_PUBLIC.
 */
async function rawCreatePrimary(sw: SwtpmInstance, hierarchy: number, template: Uint8Array): Promise<Buffer> {
  const t = Buffer.from(template);
  const size = Buffer.alloc(2);
  size.writeUInt16BE(t.length);
  // inSensitive (empty auth and data), inPublic, outsideInfo (empty), creationPCR (none)
  const params = Buffer.concat([
    Buffer.from('000400000000', 'hex'),
    size,
    t,
    Buffer.from('000000000000', 'hex'),
  ]);
  const res = await rawTpm(sw, sessionCommand(0x131, hierarchy, params));
  const handle = res.readUInt32BE(10);
  const pubSize = res.readUInt16BE(18);
  const pub = res.subarray(20, 20 + pubSize);
  const flush = Buffer.alloc(14);
  flush.writeUInt16BE(0x8001, 0);
  flush.writeUInt32BE(14, 2);
  flush.writeUInt32BE(0x165, 6);
  flush.writeUInt32BE(handle, 10);
  await rawTpm(sw, flush);
  return Buffer.from(pub);
}

/** Raw TPM2_PCR_Extend of one SHA-256 digest (replays an event log into the swtpm). */
async function rawExtendSha256(sw: SwtpmInstance, pcr: number, digest: Uint8Array): Promise<void> {
  const params = Buffer.concat([Buffer.from('00000001000b', 'hex'), Buffer.from(digest)]);
  await rawTpm(sw, sessionCommand(0x182, pcr, params));
}

const hexHandle = (h: number) => `0x${h.toString(16)}`;

async function persistentHandles(tcti: string): Promise<number[]> {
  const out = await tpm2(tcti, 'tpm2_getcap', ['handles-persistent']);
  return [...out.matchAll(/0x[0-9a-f]+/gi)].map((m) => Number.parseInt(m[0], 16));
}

async function errorOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isConfbootError(err)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
  return { code: err.code, message: err.message };
}

const pemOf = (tpmtPublic: Uint8Array) =>
  parseTpmtPublic(tpmtPublic).publicKey.export({ type: 'spki', format: 'pem' }).toString();

describe('AK from an NV template (SIMULATED GCE provisioning on a real swtpm)', { timeout: 60_000 }, () => {
  const tmp = useTmpDirs();
  let sw: SwtpmInstance;
  let dir: string;
  beforeEach(async () => {
    sw = await startSwtpm();
    dir = tmp();
  });
  afterEach(async () => {
    await sw?.stop();
  });
  const gceAdapter = (extra: { akHandle?: number; akTemplateNvIndex?: number } = {}) =>
    new Tpm2ToolsTpm({ tcti: sw.tcti, akTemplateNvIndex: GCE_AK_TEMPLATE_NV_INDEX_RSA, ...extra });

  it('parses the GCE-style template as go-tpm-tools marshals AKTemplateRSA', () => {
    const t = parseAkTemplate(GCE_RSA_TEMPLATE);
    expect(t).toMatchObject({ type: 1, nameAlg: 0x0b, attributes: SIGNER, scheme: 0x14, schemeHash: 0x0b });
    expect([t.rsaBits, t.exponent, t.uniqueOffset, t.unique[0]?.length]).toEqual([2048, 0, 22, 0]);
  });

  it('creates exactly the key GCE provisions (endorsement primary of the NV template), persists it, and quotes with it', async () => {
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
    const expected = await rawCreatePrimary(sw, TPM_RH_ENDORSEMENT, GCE_RSA_TEMPLATE);
    const ownerKey = await rawCreatePrimary(sw, TPM_RH_OWNER, GCE_RSA_TEMPLATE);
    expect(ownerKey.equals(expected)).toBe(false);

    const tpm = gceAdapter();
    const pub = Buffer.from(await tpm.attestationKeyPublic());
    expect(pub.equals(expected)).toBe(true);
    expect(pub.subarray(0, 22).equals(GCE_RSA_TEMPLATE.subarray(0, 22))).toBe(true);
    expect(await persistentHandles(sw.tcti)).toEqual([DEFAULT_AK_HANDLE]);
    await tpm2(sw.tcti, 'tpm2_readpublic', [
      '-c',
      hexHandle(DEFAULT_AK_HANDLE),
      '-f',
      'tss',
      '-o',
      `${dir}/p`,
    ]);
    expect(readFileSync(`${dir}/p`).subarray(2).equals(expected)).toBe(true);
    expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-transient'])).toBe('');

    const nonce = Buffer.alloc(32, 7);
    const q = await tpm.quote(nonce, [0, 1, 15]);
    expect(await checkQuote(dir, rsaAkPem(expected), q.quote, q.rawSig, nonce)).toBe(true);
    expect(await checkQuote(dir, rsaAkPem(ownerKey), q.quote, q.rawSig, nonce)).toBe(false);
  });

  it('passes the template through exactly: a zero-filled unique field and an auth policy give other keys, each the independent one', async () => {
    const zeroUnique = rsaTemplate({ unique: new Uint8Array(256) });
    const withPolicy = rsaTemplate({ policy: Buffer.alloc(32, 0xab) });
    const plain = await rawCreatePrimary(sw, TPM_RH_ENDORSEMENT, GCE_RSA_TEMPLATE);
    const seen: Buffer[] = [plain];
    for (const [i, template] of [zeroUnique, withPolicy].entries()) {
      const index = GCE_AK_TEMPLATE_NV_INDEX_RSA + 0x10 + i;
      await writeNvIndex(sw.tcti, index, template);
      const pub = Buffer.from(
        await gceAdapter({ akTemplateNvIndex: index, akHandle: 0x81008f10 + i }).attestationKeyPublic(),
      );
      expect(pub.equals(await rawCreatePrimary(sw, TPM_RH_ENDORSEMENT, template))).toBe(true);
      expect(seen.some((k) => k.equals(pub))).toBe(false);
      seen.push(pub);
    }
  });

  it('an ECC template (GCE ECC index 0x01c10003) gives the independent ECC key, whose quotes verify', async () => {
    const template = eccTemplate();
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_ECC, template);
    const tpm = gceAdapter({ akTemplateNvIndex: GCE_AK_TEMPLATE_NV_INDEX_ECC, akHandle: 0x81008f00 });
    const pub = Buffer.from(await tpm.attestationKeyPublic());
    expect(pub.equals(await rawCreatePrimary(sw, TPM_RH_ENDORSEMENT, template))).toBe(true);
    const nonce = Buffer.alloc(32, 9);
    const q = await tpm.quote(nonce, [0, 7]);
    expect(await checkQuote(dir, pemOf(pub), q.quote, q.rawSig, nonce)).toBe(true);
  });

  it('a second adapter reuses the persisted key (the handle is occupied, so it cannot persist again)', async () => {
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
    const first = await gceAdapter().attestationKeyPublic();
    const second = gceAdapter();
    expect(Buffer.from(await second.attestationKeyPublic()).equals(Buffer.from(first))).toBe(true);
    expect(await persistentHandles(sw.tcti)).toEqual([DEFAULT_AK_HANDLE]);
    expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-transient'])).toBe('');
    const nonce = Buffer.alloc(32, 3);
    const q = await second.quote(nonce, [15]);
    expect(await checkQuote(dir, rsaAkPem(first), q.quote, q.rawSig, nonce)).toBe(true);
  });

  it('refuses a missing index, a corrupted template and a template that is not a restricted signing key', async () => {
    const missing = await errorOf(gceAdapter().attestationKeyPublic());
    expect(missing.code).toBe('failed-precondition');
    expect(missing.message).toMatch(
      /^loading attestation key 0x81008f01 \(TCTI swtpm:.*\): NV index 0x1c10001 \(the AK template\) is not defined on this TPM/,
    );

    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE.subarray(0, 15));
    const truncated = await errorOf(gceAdapter().attestationKeyPublic());
    expect(truncated.code).toBe('failed-precondition');
    expect(truncated.message).toMatch(/NV index 0x1c10001: reading the AK template: .*truncated at/);

    const storage = rsaTemplate({ attributes: 0x00030072 }); // restricted|decrypt: an SRK, not an AK
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, storage);
    expect((await errorOf(gceAdapter().attestationKeyPublic())).message).toMatch(
      /NV index 0x1c10001: creating the AK from its template: attributes 0x30072 are not those of a restricted signing key/,
    );

    const trailing = Buffer.concat([GCE_RSA_TEMPLATE, Buffer.from([0])]);
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, trailing);
    expect((await errorOf(gceAdapter().attestationKeyPublic())).message).toMatch(/1 trailing bytes/);
    expect(await persistentHandles(sw.tcti)).toEqual([]);
    expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-transient'])).toBe('');
  });

  it('refuses (and keeps) a persisted key of another template, and one of the same template from another hierarchy', async () => {
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
    const own = await new Tpm2ToolsTpm({ tcti: sw.tcti }).attestationKeyPublic();
    const other = await errorOf(gceAdapter().attestationKeyPublic());
    expect(other.code).toBe('failed-precondition');
    expect(other.message).toMatch(
      /persistent handle 0x81008f01 holds a key of another template, not the AK from NV index 0x1c10001; refusing to replace it \(evict it with tpm2_evictcontrol -C o -c 0x81008f01/,
    );
    await tpm2(sw.tcti, 'tpm2_readpublic', ['-c', '0x81008f01', '-f', 'tss', '-o', `${dir}/kept`]);
    expect(readFileSync(`${dir}/kept`).subarray(2).equals(Buffer.from(own))).toBe(true);
    expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-transient'])).toBe('');

    // The same template under the OWNER hierarchy, persisted by hand at another handle.
    await tpm2(sw.tcti, 'tpm2_createprimary', [
      ...['-C', 'o', '-G', 'rsa2048:rsassa-sha256:null', '-a', '0x00050072', '-c', `${dir}/o.ctx`],
    ]);
    await tpm2(sw.tcti, 'tpm2_evictcontrol', ['-C', 'o', '-c', `${dir}/o.ctx`, '0x81008f20']);
    await tpm2(sw.tcti, 'tpm2_flushcontext', ['-t']);
    const sameTemplate = await errorOf(gceAdapter({ akHandle: 0x81008f20 }).attestationKeyPublic());
    expect(sameTemplate.message).toMatch(
      /persistent handle 0x81008f20 holds a key of the same template but not the one this TPM's endorsement hierarchy yields/,
    );
  });

  it('refuses options that contradict each other', () => {
    expect(() => gceAdapter({ akTemplateNvIndex: 0x81000001 })).toThrow(/is not an NV index/);
    expect(
      () =>
        new Tpm2ToolsTpm({
          tcti: 'swtpm:host=127.0.0.1,port=1',
          akTemplateNvIndex: GCE_AK_TEMPLATE_NV_INDEX_RSA,
          createAttestationKey: false,
        }),
    ).toThrow(/needs createAttestationKey/);
  });

  describe.skipIf(!HAVE_VECTORS)(
    'end to end: gcp-sev-es with the template AK (REAL COS event log, FAKE GCE API)',
    () => {
      const ZERO32 = '00'.repeat(32);
      const userData = Buffer.from('sha256-of-the-tls-key');
      const nonce = Buffer.alloc(32, 0x5a);
      const info = Buffer.from(
        JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'node-1' }),
      );
      /** FAKE GCE shielded-identity lookup returning `pem` for node-1 only. */
      const gce = (pem: string, calls: string[] = []): GceShieldedIdentity => ({
        signingKeyPem: async (project, zone, instance) => {
          calls.push(`${project}/${zone}/${instance}`);
          if (instance !== 'node-1') throw new Error('test: unknown instance');
          return pem;
        },
      });

      it('a document quoted by the template AK is accepted when GCE names that key, and refused (ak-trust) when it names another', async () => {
        await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
        const gcePublished = await rawCreatePrimary(sw, TPM_RH_ENDORSEMENT, GCE_RSA_TEMPLATE);
        // Boot the swtpm as COS 85 on AMD SEV booted: replay the real event log's SHA-256 digests.
        const logPath = resolve(tmp(), 'binary_bios_measurements');
        const raw = vec('go-tpm-tools/eventlogs/cos-85-amd-sev.bin');
        writeFileSync(logPath, raw);
        const log = parseEventLog(raw);
        expect(log.startupLocality).toBeUndefined();
        for (const e of log.events) {
          const d = e.digests.get(0x000b);
          if (e.type !== 3 && d) await rawExtendSha256(sw, e.pcr, d);
        }
        const pcr0 = (await new Tpm2ToolsTpm({ tcti: sw.tcti }).readPcrs([0])).get(0) as Uint8Array;
        const config = JSON.stringify({
          measurements: { 0: Buffer.from(pcr0).toString('hex'), 15: ZERO32 },
        });

        const issuer = new VtpmIssuer({
          variant: 'gcp-sev-es',
          oid: variantOid('gcp-sev-es'),
          tpm: gceAdapter(),
          instanceInfo: async () => info,
          eventLogPath: logPath,
        });
        const doc = await issuer.issue(userData, nonce);
        const calls: string[] = [];
        const clock = new FakeClock();
        const ok = await buildValidator('gcp-sev-es', config, {
          clock,
          gceShieldedIdentity: gce(pemOf(gcePublished), calls),
        }).validate(doc, nonce);
        expect(Buffer.from(ok.userData).equals(userData)).toBe(true);
        expect(ok.checks.filter((c) => !c.ok)).toEqual([]);
        expect(ok.checks.find((c) => c.name === 'cvm')?.detail).toMatch(/AMD_SEV/);
        expect(ok.checks.find((c) => c.name === 'ak-trust')?.ok).toBe(true);
        expect(calls).toEqual(['proj-1/us-central1-a/node-1']);

        const ownerKey = await rawCreatePrimary(sw, TPM_RH_OWNER, GCE_RSA_TEMPLATE);
        const err = await buildValidator('gcp-sev-es', config, {
          clock,
          gceShieldedIdentity: gce(pemOf(ownerKey)),
        })
          .validate(doc, nonce)
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(isAttestationError(err) && [err.check, err.message]).toEqual([
          'ak-trust',
          expect.stringMatching(/untrusted attestation public key/),
        ]);
      });
    },
  );
});
