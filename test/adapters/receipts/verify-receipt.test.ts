/**
 * Receipt verification beyond the signature itself: one token per receipt (low-S only), the key's
 * kid is its own thumbprint, the pins of the signing key, and the EAR status order.
 */
import { createHash, createPrivateKey, createPublicKey, verify } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  compactJwsToLowS,
  flipS,
  isLowS,
  P256_HALF_ORDER,
  P256_ORDER,
} from '../../../src/adapters/receipts/ecdsa-low-s.js';
import { ReceiptKey } from '../../../src/adapters/receipts/receipt-key.js';
import { signingKeyPin } from '../../../src/adapters/receipts/receipt-key-pin.js';
import {
  EAR_STATUS_ORDER,
  submodsBelow,
  verifyReceipt,
} from '../../../src/adapters/receipts/verify-receipt.js';
import { buildReceiptClaims } from '../../../src/domain/receipts.js';
import type { EarStatus, ReceiptClaims } from '../../../src/ports/receipt-signer.js';

const claims = (warnings = false) =>
  buildReceiptClaims(
    {
      rpc: 'IssueJoinTicket',
      nodeName: 'worker-1',
      diskUuid: '0e9c7a3b-1111-4222-8333-944445555666',
      peer: '127.0.0.10:40000',
      variant: 'qemu-vtpm',
      checks: [
        { name: 'peer-certificate', ok: true },
        { name: 'quote-signature', ok: true },
        { name: 'measurements', ok: true },
      ],
      warnings: warnings
        ? [{ index: 9, expected: new Uint8Array(32), actual: new Uint8Array(32).fill(1), warnOnly: true }]
        : [],
      nonce: new Uint8Array(32).fill(7),
      userData: new Uint8Array(32).fill(9),
    },
    { issuedAt: new Date('2026-11-26T06:00:00Z'), build: 'confboot test' },
  );

/** `token` with its signature replaced by `(r, n - s)`. */
function flipped(token: string): string {
  const [h, p, sig] = token.split('.') as [string, string, string];
  return `${h}.${p}.${flipS(Buffer.from(sig, 'base64url')).toString('base64url')}`;
}

describe('receipt verification: one token per receipt, self-certifying kid, pins, statuses', () => {
  let dir: string;
  let key: ReceiptKey;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'verify-receipt-'));
    key = await ReceiptKey.loadOrGenerate(join(dir, 'receipt.pem'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('n/2 is the P-256 half order', () => {
    expect(P256_HALF_ORDER * 2n + 1n).toBe(P256_ORDER);
  });

  it('the receipt key signs low-S only (20 receipts; a raw ECDSA signature is high-S half the time)', async () => {
    for (let i = 0; i < 20; i++) {
      const sig = Buffer.from((await key.sign(claims())).split('.')[2] as string, 'base64url');
      expect(isLowS(sig)).toBe(true);
    }
  });

  it('a high-S copy of a valid token is a valid ECDSA signature, and it is refused', async () => {
    const token = await key.sign(claims());
    const copy = flipped(token);
    expect(copy).not.toBe(token);
    const [h, p, sig] = copy.split('.') as [string, string, string];
    const pub = createPublicKey({ key: key.jwks().keys[0] as never, format: 'jwk' });
    // Plain ECDSA accepts the copy: only the low-S rule tells the two apart.
    expect(
      verify(
        'sha256',
        Buffer.from(`${h}.${p}`),
        { key: pub, dsaEncoding: 'ieee-p1363' },
        Buffer.from(sig, 'base64url'),
      ),
    ).toBe(true);
    await expect(verifyReceipt(copy, key.jwks())).rejects.toThrow(/not low-S/);
    await expect(verifyReceipt(token, key.jwks())).resolves.toBeDefined();
  });

  it('a JWKS key whose kid is not its own thumbprint is refused, even with a good signature', async () => {
    const other = await ReceiptKey.loadOrGenerate(join(dir, 'other.pem'));
    const [otherJwk] = other.jwks().keys;
    // The other key published under this key's kid: what a JWKS answering for the kid could do.
    const jwks = { keys: [{ ...otherJwk, kid: key.keyId }] };
    const token = compactJwsToLowS(
      await new SignJWT(claims() as unknown as Record<string, unknown>)
        .setProtectedHeader({ alg: 'ES256', kid: key.keyId, typ: 'JWT' })
        .sign(createPrivateKey(await readFile(join(dir, 'other.pem')))),
    );
    await expect(verifyReceipt(token, jwks)).rejects.toThrow(/not its own RFC 7638 thumbprint/);
  });

  it('pins: the right kid and thumbprint pass; any other is refused', async () => {
    const token = await key.sign(claims());
    const pin = await signingKeyPin(key.jwks());
    expect(pin.kid).toBe(key.keyId);
    // RFC 7638 by hand: SHA-256 of the required members in lexicographic order, no whitespace.
    const { crv, kty, x, y } = key.jwks().keys[0] as unknown as Record<string, string>;
    const rfc7638 = createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest('hex');
    expect(pin.jwksSha256).toBe(rfc7638);
    expect(pin.jwksSha256).toMatch(/^[0-9a-f]{64}$/);
    const ok = await verifyReceipt(token, key.jwks(), {
      kid: pin.kid,
      jwksSha256: pin.jwksSha256.toUpperCase(),
    });
    expect(ok.key).toEqual(pin);
    const other = await signingKeyPin((await ReceiptKey.loadOrGenerate(join(dir, 'o.pem'))).jwks());
    await expect(verifyReceipt(token, key.jwks(), { kid: other.kid })).rejects.toThrow(
      /not the pinned key ID/,
    );
    await expect(verifyReceipt(token, key.jwks(), { jwksSha256: other.jwksSha256 })).rejects.toThrow(
      /not the pinned thumbprint/,
    );
  });

  it('statuses rank affirming > warning > contraindicated > none', async () => {
    expect(EAR_STATUS_ORDER).toEqual(['none', 'contraindicated', 'warning', 'affirming']);
    const { claims: c } = await verifyReceipt(await key.sign(claims(true)), key.jwks());
    expect(submodsBelow(c, 'affirming')).toEqual([{ name: 'measurements', status: 'warning' }]);
    expect(submodsBelow(c, 'warning')).toEqual([]);
    const mixed = (s: EarStatus) =>
      ({ ...c, submods: { a: { ...c.submods.measurements, 'ear.status': s } } }) as ReceiptClaims;
    expect(submodsBelow(mixed('contraindicated'), 'warning')).toHaveLength(1);
    expect(submodsBelow(mixed('contraindicated'), 'contraindicated')).toEqual([]);
    expect(submodsBelow(mixed('none'), 'contraindicated')).toHaveLength(1);
    expect(submodsBelow(mixed('none'), 'none')).toEqual([]);
  });
});
