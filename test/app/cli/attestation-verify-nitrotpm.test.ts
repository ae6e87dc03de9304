/**
 * `confboot attestation verify-nitrotpm` on the real NitroTPM document captured on EC2 on
 * 2026-02-03 (../shared/testvectors/aws-nitrotpm, written to a temp file as binary or hex at test
 * time): exit 0 at its own time with its nonce, 1 (naming the failing check) at today's date, with
 * another nonce or a changed payload byte, 2 for bad input. The last case runs the built CLI
 * (dist/, `npx tsc -p tsconfig.build.json`) as a child process.
 */
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../../../src/app/cli/attestation-verify-nitrotpm.js';
import { describeVectors, HAVE_VECTORS, vec } from '../../adapters/attestation/snp/vectors.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-nitrotpm-cli-');
const { stdout, stderr } = captureStdio();
const fixture = HAVE_VECTORS
  ? (JSON.parse(vec('aws-nitrotpm/vaportpm-test-nitro-fixture.json').toString('utf8')) as {
      nonce: string;
      attestation: { nitro: { document: string } };
    })
  : undefined;
const hexDoc = fixture?.attestation.nitro.document ?? '';
const nonce = fixture?.nonce ?? '';
const AT = ['--at', '2026-02-03T10:12:02Z'];
const DIST_CLI = resolve(import.meta.dirname, '../../../dist/src/app/cli/main.js');

function file(name: string, data: string | Buffer): string {
  const path = join(tmp(), name);
  writeFileSync(path, data);
  return path;
}

describeVectors('confboot attestation verify-nitrotpm', () => {
  it('exit 0: the binary document at its own time with its nonce, printing PCRs and public key', async () => {
    const doc = file('doc.cbor', Buffer.from(hexDoc, 'hex'));
    expect(await run(['--document', doc, '--nonce', nonce, ...AT])).toBe(0);
    const out = stdout();
    for (const c of ['nitrotpm-format', 'nitrotpm-signature', 'nitrotpm-certificate', 'nitrotpm-nonce'])
      expect(out).toContain(`PASS  ${c}`);
    expect(out).toContain('module i-01cfb383223e42522-tpm0000000000000000');
    expect(out).toContain('PCR4 (sha384) 1a1f166e1995c1e1');
    expect(out.trim().endsWith('ACCEPTED')).toBe(true);
  });

  it('exit 0: the same document as hex text, with --json', async () => {
    const doc = file('doc.hex', `${hexDoc}\n`);
    expect(await run(['--document', doc, '--nonce', nonce, ...AT, '--json'])).toBe(0);
    const res = (JSON.parse(stdout()) as { result: { accepted: boolean; document: { moduleId: string } } })
      .result;
    expect(res.accepted).toBe(true);
    expect(res.document.moduleId).toMatch(/^i-01cfb383223e42522/);
  });

  it("exit 1: at today's date (the certificates expired), naming the failing check", async () => {
    const doc = file('doc.hex', hexDoc);
    expect(await run(['--document', doc, '--nonce', nonce])).toBe(1);
    expect(stdout()).toContain('FAIL  nitrotpm-certificate');
    expect(stdout()).toContain('REFUSED (nitrotpm-certificate)');
  });

  it('exit 1: with another nonce', async () => {
    const doc = file('doc.hex', hexDoc);
    const other = `${nonce.slice(0, -2)}${nonce.endsWith('00') ? '01' : '00'}`;
    expect(await run(['--document', doc, '--nonce', other, ...AT])).toBe(1);
    expect(stdout()).toContain('REFUSED (nitrotpm-nonce)');
  });

  it('exit 1: with one payload byte changed (the PCR 4 value)', async () => {
    const bytes = Buffer.from(hexDoc, 'hex');
    const at = bytes.indexOf(Buffer.from('1a1f166e1995c1e1', 'hex'));
    expect(at).toBeGreaterThan(0);
    bytes[at] = (bytes[at] as number) ^ 0x80;
    expect(await run(['--document', file('bad.cbor', bytes), '--nonce', nonce, ...AT])).toBe(1);
    expect(stdout()).toContain('REFUSED (nitrotpm-signature)');
  });

  it('exit 2: bad input (missing file, no --nonce, non-hex nonce, bad --at, odd hex)', async () => {
    const doc = file('doc.hex', hexDoc);
    expect(await run(['--document', join(tmp(), 'missing'), '--nonce', nonce])).toBe(2);
    expect(await run(['--document', doc])).toBe(2);
    expect(await run(['--document', doc, '--nonce', 'xyz'])).toBe(2);
    expect(await run(['--document', doc, '--nonce', nonce, '--at', 'yesterday'])).toBe(2);
    expect(await run(['--document', file('odd.hex', 'abc'), '--nonce', nonce])).toBe(2);
    expect(stderr()).toContain('--nonce is not hex');
  });

  it('through the built CLI (`confboot attestation verify-nitrotpm`): exit codes 0, 1 and 2', async () => {
    if (!existsSync(DIST_CLI)) throw new Error(`${DIST_CLI} is missing: run npm run build first`);
    const doc = file('doc.hex', hexDoc);
    const cli = (args: string[]) =>
      new Promise<number>((done) => {
        execFile(
          process.execPath,
          [DIST_CLI, 'attestation', 'verify-nitrotpm', ...args],
          { timeout: 60_000 },
          (err) => done(err ? ((err as { code?: number }).code ?? -1) : 0),
        );
      });
    expect(await cli(['--document', doc, '--nonce', nonce, ...AT])).toBe(0);
    expect(await cli(['--document', doc, '--nonce', nonce])).toBe(1);
    expect(await cli(['--document', doc, '--nonce', 'zz'])).toBe(2);
  });
});
