import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { matchesRsaAkTemplate } from '../../../src/adapters/tpm/tpm-structures.js';
import { Tpm2ToolError } from '../../../src/adapters/tpm/tpm2-tools-exec.js';
import { ALL_PCRS, DEFAULT_AK_HANDLE, Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { checkQuote, extraDataOf, handles, pcrDigestOf, rsaAkPem, tpm2 } from './tpm-test-helpers.js';

const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const sha1 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha1');
  for (const p of parts) h.update(p);
  return h.digest();
};
const nonce = (i: number): Uint8Array => sha256(Buffer.from(`nonce ${i}`));

describe('Tpm2ToolsTpm on swtpm', () => {
  const swtpm = useSwtpm();
  const tmp = useTmpDirs();

  describe('attestation key', () => {
    it('is created once, persisted at 0x81008F01 and reused by other adapter instances', async () => {
      const s = await swtpm();
      expect(await handles(s.tcti, 'persistent')).not.toContain(DEFAULT_AK_HANDLE);
      const a = await new Tpm2ToolsTpm({ tcti: s.tcti }).attestationKeyPublic();
      expect(await handles(s.tcti, 'persistent')).toEqual([DEFAULT_AK_HANDLE]);
      const b = await new Tpm2ToolsTpm({ tcti: s.tcti }).attestationKeyPublic();
      expect(Buffer.from(b).equals(Buffer.from(a))).toBe(true);
      expect(await handles(s.tcti, 'persistent')).toEqual([DEFAULT_AK_HANDLE]);
      expect(await handles(s.tcti, 'transient')).toEqual([]);
    });

    it('is RSA-2048 restricted RSASSA-SHA256 (AttestationKeyRSA template), as TPMT_PUBLIC bytes', async () => {
      const s = await swtpm();
      const pub = await new Tpm2ToolsTpm({ tcti: s.tcti }).attestationKeyPublic();
      expect(pub.length).toBe(22 + 2 + 256);
      expect(matchesRsaAkTemplate(pub)).toBe(true);
      // The same key as the TPM reports, independently read and converted by tpm2-tools.
      const pemFromTool = join(tmp(), 'ak.pem');
      await tpm2(s.tcti, 'tpm2_readpublic', ['-c', '0x81008F01', '-f', 'pem', '-o', pemFromTool]);
      const { readFileSync } = await import('node:fs');
      expect(rsaAkPem(pub)).toBe(readFileSync(pemFromTool, 'utf8'));
    });

    it('survives a swtpm restart on the same state', async () => {
      const dir = tmp();
      const first = await startSwtpm({ stateDir: dir });
      const a = await new Tpm2ToolsTpm({ tcti: first.tcti }).attestationKeyPublic();
      await first.stop();
      const second = await swtpm({ stateDir: dir });
      const b = await new Tpm2ToolsTpm({ tcti: second.tcti }).attestationKeyPublic();
      expect(Buffer.from(b).equals(Buffer.from(a))).toBe(true);
    });

    it('replaces a key of another template at the handle, but uses it as is when creation is off', async () => {
      const s = await swtpm();
      const ctx = join(tmp(), 'ecc.ctx');
      await tpm2(s.tcti, 'tpm2_createprimary', ['-C', 'o', '-G', 'ecc', '-c', ctx]);
      await tpm2(s.tcti, 'tpm2_evictcontrol', ['-C', 'o', '-c', ctx, '0x81008F01']);
      await tpm2(s.tcti, 'tpm2_flushcontext', ['-t']);
      const asIs = await new Tpm2ToolsTpm({
        tcti: s.tcti,
        createAttestationKey: false,
      }).attestationKeyPublic();
      expect(asIs[1]).toBe(0x23); // TPM_ALG_ECC
      const replaced = await new Tpm2ToolsTpm({ tcti: s.tcti }).attestationKeyPublic();
      expect(matchesRsaAkTemplate(replaced)).toBe(true);
      expect(await handles(s.tcti, 'transient')).toEqual([]);
    });

    it('fails with failed-precondition when creation is off and the handle is empty', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti, akHandle: 0x81000003, createAttestationKey: false });
      await expect(tpm.attestationKeyPublic()).rejects.toMatchObject({
        code: 'failed-precondition',
        message: expect.stringMatching(/loading attestation key 0x81000003 .*no attestation key/),
      });
    });
  });

  describe('quote', () => {
    it('quotes SHA-256 PCRs 0–23 with the nonce; tpm2_checkquote accepts it and the PCR digest matches', async () => {
      const s = await swtpm();
      const dir = tmp();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await tpm.pcrEvent(16, Buffer.from('some event'));
      const pem = rsaAkPem(await tpm.attestationKeyPublic());
      const q = await tpm.quote(nonce(1));

      expect([...q.pcrs.keys()]).toEqual([...ALL_PCRS]);
      expect(extraDataOf(q.quote).equals(Buffer.from(nonce(1)))).toBe(true);
      const flat = Buffer.concat(ALL_PCRS.map((i) => q.pcrs.get(i) as Uint8Array));
      expect(pcrDigestOf(q.quote).equals(sha256(flat))).toBe(true);
      expect(Buffer.from(q.rawSig.subarray(0, 4)).toString('hex')).toBe('0014000b'); // RSASSA, SHA-256
      const readBack = await tpm.readPcrs([...ALL_PCRS]);
      expect([...readBack.values()].map((v) => Buffer.from(v).toString('hex'))).toEqual(
        [...q.pcrs.values()].map((v) => Buffer.from(v).toString('hex')),
      );

      expect(await checkQuote(dir, pem, q.quote, q.rawSig, nonce(1))).toBe(true);
      expect(await checkQuote(dir, pem, q.quote, q.rawSig, nonce(2))).toBe(false);
      const tampered = q.quote.slice();
      tampered[tampered.length - 1] = (tampered.at(-1) as number) ^ 1;
      expect(await checkQuote(dir, pem, tampered, q.rawSig, nonce(1))).toBe(false);
    });

    it('quotes a chosen PCR subset in ascending order, and an empty nonce', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      const q = await tpm.quote(new Uint8Array(0), [15, 0, 7, 7]);
      expect([...q.pcrs.keys()]).toEqual([0, 7, 15]);
      expect(extraDataOf(q.quote).length).toBe(0);
      const pem = rsaAkPem(await tpm.attestationKeyPublic());
      expect(await checkQuote(tmp(), pem, q.quote, q.rawSig, new Uint8Array(0))).toBe(true);
    });

    it('quotes the SHA-1 bank on request: 20-byte values, digest by the AK signing hash', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await tpm.pcrEvent(16, Buffer.from('some event'));
      const q = await tpm.quoteBank('sha1', nonce(3), [0, 16]);
      expect([...q.pcrs.values()].map((v) => v.length)).toEqual([20, 20]);
      expect(Buffer.from(q.pcrs.get(16) as Uint8Array).toString('hex')).toBe(
        sha1(Buffer.alloc(20), sha1(Buffer.from('some event'))).toString('hex'),
      );
      expect(
        pcrDigestOf(q.quote).equals(sha256(q.pcrs.get(0) as Uint8Array, q.pcrs.get(16) as Uint8Array)),
      ).toBe(true);
      const pem = rsaAkPem(await tpm.attestationKeyPublic());
      expect(await checkQuote(tmp(), pem, q.quote, q.rawSig, nonce(3))).toBe(true);
    });

    it('serializes parallel quotes from several adapters on one swtpm', async () => {
      const s = await swtpm();
      const dir = tmp();
      const adapters = [new Tpm2ToolsTpm({ tcti: s.tcti }), new Tpm2ToolsTpm({ tcti: s.tcti })];
      const quotes = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (adapters[i % 2] as Tpm2ToolsTpm).quote(nonce(i))),
      );
      const pem = rsaAkPem(await (adapters[0] as Tpm2ToolsTpm).attestationKeyPublic());
      for (const [i, q] of quotes.entries()) {
        expect(extraDataOf(q.quote).equals(Buffer.from(nonce(i)))).toBe(true);
        expect(await checkQuote(dir, pem, q.quote, q.rawSig, nonce(i))).toBe(true);
      }
      expect(await handles(s.tcti, 'transient')).toEqual([]);
      expect(await handles(s.tcti, 'persistent')).toEqual([DEFAULT_AK_HANDLE]);
    });

    it('rejects PCR indices outside 0–23 without touching the TPM', async () => {
      const tpm = new Tpm2ToolsTpm({ tcti: 'swtpm:host=127.0.0.1,port=1' });
      await expect(tpm.quote(nonce(0), [24])).rejects.toMatchObject({ code: 'invalid-argument' });
      await expect(tpm.readPcrs([-1])).rejects.toMatchObject({ code: 'invalid-argument' });
      await expect(tpm.pcrEvent(1.5, new Uint8Array(1))).rejects.toMatchObject({ code: 'invalid-argument' });
    });

    it('reports the time per quote (measured, not asserted)', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await tpm.attestationKeyPublic();
      const n = 10;
      const start = performance.now();
      for (let i = 0; i < n; i++) await tpm.quote(nonce(i));
      const perQuote = (performance.now() - start) / n;
      console.log(
        `tpm2-tools quote of SHA-256 PCRs 0-23 on swtpm: ${perQuote.toFixed(1)} ms per quote (n=${n})`,
      );
      expect(perQuote).toBeGreaterThan(0);
    });
  });

  describe('PCRs', () => {
    it.each([
      ['a short event (TPM2_PCR_Event)', Buffer.from('cluster-id')],
      ['an empty event', Buffer.alloc(0)],
      ['an event over 1024 bytes (hash sequence)', Buffer.alloc(3000, 0xab)],
    ])('extends every bank with the hash of %s', async (_name, data) => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await tpm.pcrEvent(16, Buffer.from('first'));
      const old = (await tpm.readPcrs([16])).get(16) as Uint8Array;
      const oldSha1 = Buffer.from(
        (await tpm2(s.tcti, 'tpm2_pcrread', ['sha1:16'])).match(/0x([0-9A-F]{40})/i)?.[1] ?? '',
        'hex',
      );
      await tpm.pcrEvent(16, data);
      const now = (await tpm.readPcrs([16])).get(16) as Uint8Array;
      expect(Buffer.from(now).toString('hex')).toBe(sha256(old, sha256(data)).toString('hex'));
      const nowSha1 = (await tpm2(s.tcti, 'tpm2_pcrread', ['sha1:16'])).match(/0x([0-9A-F]{40})/i)?.[1];
      expect(nowSha1?.toLowerCase()).toBe(sha1(oldSha1, sha1(data)).toString('hex'));
    });

    it('reads PCRs by index in ascending order, duplicates once, nothing for none', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await tpm.pcrEvent(23, Buffer.from('x'));
      const values = await tpm.readPcrs([23, 0, 17, 0]);
      expect([...values.keys()]).toEqual([0, 17, 23]);
      expect(Buffer.from(values.get(0) as Uint8Array).equals(Buffer.alloc(32))).toBe(true);
      expect(Buffer.from(values.get(17) as Uint8Array).equals(Buffer.alloc(32, 0xff))).toBe(true);
      expect(Buffer.from(values.get(23) as Uint8Array).toString('hex')).toBe(
        sha256(Buffer.alloc(32), sha256(Buffer.from('x'))).toString('hex'),
      );
      expect((await tpm.readPcrs([])).size).toBe(0);
    });
  });

  describe('errors and cleanup', () => {
    it('names the tool and carries its stderr when the TPM is unreachable', async () => {
      const s = await startSwtpm();
      await s.stop();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      const err = await tpm.readPcrs([0]).catch((e: unknown) => e);
      expect(isConfbootError(err)).toBe(true);
      expect(err).toMatchObject({ code: 'unavailable' });
      expect((err as Error).message).toMatch(
        /^reading SHA-256 PCRs 0 \(TCTI swtpm:.*\): tpm2_pcrread failed.*tcti/is,
      );
      const cause = (err as Error).cause as Tpm2ToolError;
      expect(cause).toBeInstanceOf(Tpm2ToolError);
      expect(cause.tool).toBe('tpm2_pcrread');
      expect(cause.exitCode).toBe(1);
      expect(cause.stderr).toMatch(/Could not load tcti/);
    });

    it('names the tool when the TPM refuses a command (PCR 17 is not resettable from locality 0)', async () => {
      const s = await swtpm();
      const err = await new Tpm2ToolsTpm({ tcti: s.tcti })
        .pcrEvent(17, Buffer.from('x'))
        .catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/recording an event in PCR 17 .*tpm2_pcrevent failed/s);
      expect(((err as Error).cause as Tpm2ToolError).stderr).not.toBe('');
    });

    it('honours the deadline and the caller abort', async () => {
      const s = await swtpm();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
      await expect(tpm.quote(nonce(0), undefined, { timeoutInMs: 1 })).rejects.toMatchObject({
        code: 'deadline-exceeded',
        message: expect.stringMatching(
          /^quoting SHA-256 PCRs 0-23 \(TCTI swtpm:.*\): (tpm2_\w+: )?timed out after 1 ms/,
        ),
      });
      await expect(tpm.readPcrs([0], { signal: AbortSignal.abort() })).rejects.toThrow(
        /aborted by the caller/,
      );
      // The queue keeps working afterwards.
      expect((await tpm.readPcrs([0])).size).toBe(1);
    });

    it('leaves no temp files behind, also after a failure', async () => {
      const s = await swtpm();
      const base = tmp();
      const tpm = new Tpm2ToolsTpm({ tcti: s.tcti, tmpDir: base });
      await tpm.quote(nonce(0));
      await tpm.pcrEvent(16, Buffer.from('e'));
      await tpm.readPcrs([16]);
      await tpm.pcrEvent(17, Buffer.from('e')).catch(() => undefined);
      expect(readdirSync(base)).toEqual([]);
    });
  });
});
