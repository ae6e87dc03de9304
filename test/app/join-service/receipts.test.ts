/**
 * Join receipts through the real join service: real attested TLS on loopback, the real qemu-vtpm
 * validator on soft-TPM quotes, the real key service and CA, SIMULATED Kubernetes. Every issued
 * ticket carries a receipt that verifies against the JWKS the service serves over HTTP, names the
 * node and its appraisal, and is in the audit record; a refused node gets none.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { parseJwks, ReceiptKey } from '../../../src/adapters/receipts/receipt-key.js';
import { verifyReceipt } from '../../../src/adapters/receipts/verify-receipt.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { EAR_PROFILE } from '../../../src/ports/receipt-signer.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { rejectionOf, startHarness, waitFor } from './harness.js';

const tmp = useTmpDirs('confboot-join-receipts-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const ZERO = '00'.repeat(32);
/** PCR 4 of the honest node's boot chain (the join service requires a measured boot-chain PCR). */
const GOOD_PCR4 = createHash('sha256').update('confboot image boot loader').digest();

describe('join receipts from the join service (soft TPM nodes, simulated Kubernetes)', () => {
  it('an issued ticket carries a receipt that verifies against the JWKS served on loopback HTTP; a refused node gets none', async () => {
    const dir = tmp();
    const configPath = join(dir, 'attestationConfig');
    writeFileSync(
      configPath,
      JSON.stringify({
        measurements: {
          4: { expected: GOOD_PCR4.toString('hex'), warnOnly: false },
          15: { expected: ZERO, warnOnly: false },
        },
      }),
    );
    const validator = await UpdatableValidator.start({
      path: configPath,
      build: validatorBuilder('qemu-vtpm', {}, new SystemClock(), silentLogger),
      logger: silentLogger,
    });
    cleanups.push(() => validator.close());
    const receiptKey = await ReceiptKey.loadOrGenerate(join(dir, 'receipt-key.pem'));
    const h = await startHarness(tmp(), { validators: [validator], receiptKey });
    cleanups.push(() => h.stop());

    const served = await h.http('/.well-known/jwks.json');
    expect(served.status).toBe(200);
    const jwks = parseJwks(served.body);
    expect(jwks.keys.map((k) => k.kid)).toEqual([receiptKey.keyId]);

    const request = await h.joinRequest('worker-1');
    const goodTpm = SoftTpm.create();
    goodTpm.setPcr(SHA256, 4, GOOD_PCR4);
    const ticket = await h.client(new SoftVtpmIssuer(goodTpm)).issueJoinTicket(h.endpoint, request);
    expect(ticket.receipt).toBeDefined();
    const { header, claims } = await verifyReceipt(ticket.receipt as string, jwks);
    expect(header.kid).toBe(receiptKey.keyId);
    expect(claims.eat_profile).toBe(EAR_PROFILE);
    expect(claims['confboot.receipt']).toMatchObject({
      rpc: 'IssueJoinTicket',
      node: 'worker-1',
      diskUuid: request.diskUuid.toLowerCase(),
      controlPlane: false,
      variant: 'qemu-vtpm',
      measurementSet: 'default',
      nonceBinding: 'sha256(tls-exporter-nonce)',
    });
    expect(claims.submods.measurements?.['ear.status']).toBe('affirming');
    expect(claims.submods['qemu-vtpm']?.['confboot.checks'].map((c) => c.name)).toContain('quote-signature');
    expect(claims.submods['attested-tls']?.['confboot.checks'].map((c) => c.name)).toContain('user-data');
    expect(Buffer.from(claims.eat_nonce, 'base64url')).toHaveLength(32);

    const tamperedTpm = SoftTpm.create();
    tamperedTpm.extend(SHA256, 4, createHash('sha256').update('rogue bootloader').digest());
    await rejectionOf(
      h.client(new SoftVtpmIssuer(tamperedTpm)).issueJoinTicket(h.endpoint, await h.joinRequest('worker-2')),
    );
    await waitFor(() => h.logs.audits().length === 2, 'two audit events');
    const [issued, refused] = h.logs.audits();
    expect(issued?.receipt).toBe(ticket.receipt);
    expect(refused?.outcome).toBe('refused');
    expect(refused?.receipt).toBeUndefined();
  });

  it('a receipt that cannot be signed fails the call: nothing is handed out without its receipt', async () => {
    const receiptKey = await ReceiptKey.loadOrGenerate(join(tmp(), 'receipt-key.pem'));
    const broken = {
      keyId: receiptKey.keyId,
      jwks: () => receiptKey.jwks(),
      sign: () => Promise.reject(new Error('HSM unplugged')),
    };
    const h = await startHarness(tmp(), { receiptKey: broken });
    cleanups.push(() => h.stop());
    await rejectionOf(h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-1')));
    await waitFor(() => h.logs.audits().length === 1, 'the audit event');
    expect(h.logs.audits()[0]).toMatchObject({ outcome: 'refused', reason: 'receipt-failed' });
  });

  it('a service without a receipt key issues tickets without receipts and serves no JWKS', async () => {
    const h = await startHarness(tmp());
    cleanups.push(() => h.stop());
    expect((await h.http('/.well-known/jwks.json')).status).toBe(404);
    const ticket = await h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-1'));
    expect(ticket.receipt).toBeUndefined();
  });
});
