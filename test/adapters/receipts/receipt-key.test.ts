import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ReceiptKey, readJwksFile } from '../../../src/adapters/receipts/receipt-key.js';
import { verifyReceipt } from '../../../src/adapters/receipts/verify-receipt.js';
import { buildReceiptClaims } from '../../../src/domain/receipts.js';
import { EAR_PROFILE } from '../../../src/ports/receipt-signer.js';

const claims = () =>
  buildReceiptClaims(
    {
      rpc: 'IssueJoinTicket',
      nodeName: 'worker-1',
      diskUuid: '0E9C7A3B-1111-4222-8333-944445555666',
      isControlPlane: false,
      peer: '127.0.0.10:40000',
      variant: 'qemu-vtpm',
      checks: [
        { name: 'peer-certificate', ok: true },
        { name: 'variant-oid', ok: true },
        { name: 'quote-signature', ok: true },
        { name: 'measurements', ok: true },
        { name: 'user-data', ok: true },
      ],
      warnings: [],
      nonce: new Uint8Array(32).fill(7),
      userData: new Uint8Array(32).fill(9),
    },
    { issuedAt: new Date('2026-11-26T06:00:00Z'), build: 'confboot test' },
  );

describe('join receipts: ES256 JWT in the EAR format, verified against a JWKS', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'receipt-key-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('a signed receipt verifies against the JWKS and carries the EAR claims', async () => {
    const key = await ReceiptKey.loadOrGenerate(join(dir, 'receipt.pem'));
    const token = await key.sign(claims());
    const { header, claims: c } = await verifyReceipt(token, key.jwks());
    expect(header).toMatchObject({ alg: 'ES256', kid: key.keyId, typ: 'JWT' });
    expect(c.eat_profile).toBe(EAR_PROFILE);
    expect(c.iat).toBe(Date.parse('2026-11-26T06:00:00Z') / 1000);
    expect(c['confboot.receipt']).toMatchObject({
      node: 'worker-1',
      variant: 'qemu-vtpm',
      measurementSet: 'default',
      diskUuid: '0e9c7a3b-1111-4222-8333-944445555666',
    });
    expect(Object.keys(c.submods).sort()).toEqual(['attested-tls', 'measurements', 'qemu-vtpm']);
    for (const a of Object.values(c.submods)) expect(a['ear.status']).toBe('affirming');
    expect(c.submods.measurements?.['ear.trustworthiness-vector']).toEqual({ executables: 3 });
  });

  it('a receipt with any single character changed is refused', async () => {
    const key = await ReceiptKey.loadOrGenerate(join(dir, 'receipt.pem'));
    const token = await key.sign(claims());
    const jwks = key.jwks();
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
    const ends = new Set([token.indexOf('.') - 1, token.lastIndexOf('.') - 1, token.length - 1]);
    let tried = 0;
    for (let i = 0; i < token.length; i++) {
      const c = token[i] as string;
      // Every other character at the last position of each part (where base64url has spare
      // bits), one other character elsewhere.
      const replacements = ends.has(i) ? [...alphabet].filter((r) => r !== c) : [c === 'A' ? 'B' : 'A'];
      for (const r of replacements) {
        const changed = token.slice(0, i) + r + token.slice(i + 1);
        await expect(verifyReceipt(changed, jwks), `position ${i} → ${r}`).rejects.toThrow();
        tried++;
      }
    }
    expect(tried).toBeGreaterThan(token.length);
  });

  it('a receipt signed by another key is refused, also when it names the published kid', async () => {
    const key = await ReceiptKey.loadOrGenerate(join(dir, 'receipt.pem'));
    const other = await ReceiptKey.loadOrGenerate(join(dir, 'other.pem'));
    await expect(verifyReceipt(await other.sign(claims()), key.jwks())).rejects.toThrow(
      /signature check failed/,
    );
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { SignJWT } = await import('jose');
    const forged = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'ES256', kid: key.keyId, typ: 'JWT' })
      .sign(privateKey);
    await expect(verifyReceipt(forged, key.jwks())).rejects.toThrow(/signature check failed/);
  });

  it('alg none and HS256 with the public key as secret are refused', async () => {
    const key = await ReceiptKey.loadOrGenerate(join(dir, 'receipt.pem'));
    const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const none = `${enc({ alg: 'none', kid: key.keyId })}.${enc(claims())}.`;
    await expect(verifyReceipt(none, key.jwks())).rejects.toThrow();
    const { SignJWT } = await import('jose');
    const hs = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS256', kid: key.keyId })
      .sign(new TextEncoder().encode(JSON.stringify(key.jwks().keys[0])));
    await expect(verifyReceipt(hs, key.jwks())).rejects.toThrow(/signature check failed/);
  });

  it('the key is stable across loads (same kid, receipts of one load verify with the JWKS of another)', async () => {
    const path = join(dir, 'receipt.pem');
    const a = await ReceiptKey.loadOrGenerate(path);
    const b = await ReceiptKey.load(path);
    expect(b.keyId).toBe(a.keyId);
    await verifyReceipt(await a.sign(claims()), b.jwks());
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('retired public keys are published next to the current one; a private JWK there is refused', async () => {
    const old = await ReceiptKey.loadOrGenerate(join(dir, 'old.pem'));
    await writeFile(join(dir, 'retired.json'), JSON.stringify(old.jwks()));
    const current = await ReceiptKey.loadOrGenerate(join(dir, 'new.pem'));
    const served = await ReceiptKey.load(join(dir, 'new.pem'), {
      retiredJwksPath: join(dir, 'retired.json'),
    });
    expect(served.jwks().keys.map((k) => k.kid)).toEqual([current.keyId, old.keyId]);
    await verifyReceipt(await old.sign(claims()), served.jwks());
    const { exportJWK } = await import('jose');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    await writeFile(join(dir, 'bad.json'), JSON.stringify({ keys: [await exportJWK(privateKey)] }));
    await expect(
      ReceiptKey.load(join(dir, 'new.pem'), { retiredJwksPath: join(dir, 'bad.json') }),
    ).rejects.toThrow(/private key/);
  });

  it('a missing key file is an error without generation; a non-P-256 key is refused without echoing it', async () => {
    await expect(ReceiptKey.load(join(dir, 'absent.pem'))).rejects.toThrow(/absent\.pem: no such file/);
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    await writeFile(join(dir, 'p384.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    await expect(ReceiptKey.load(join(dir, 'p384.pem'))).rejects.toThrow(/P-256/);
    await writeFile(join(dir, 'junk.pem'), 'secret-looking junk');
    const err = await ReceiptKey.load(join(dir, 'junk.pem')).catch((e: Error) => e);
    expect(String(err)).not.toContain('secret-looking');
    expect(await readFile(join(dir, 'junk.pem'), 'utf8')).toBe('secret-looking junk');
  });
});

describe("readJwksFile (the join service's retired keys)", () => {
  it('refuses a file over 64 KiB after reading one byte past the cap, never the whole file (/dev/zero has no end)', async () => {
    await expect(readJwksFile('/dev/zero')).rejects.toThrow(/larger than 65536 bytes/);
  });
});
