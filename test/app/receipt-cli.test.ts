/**
 * `confboot receipt verify` through run(): a receipt from a real receipt key, its JWKS from a file
 * and from the join service's operations HTTP server on loopback; changed receipts, another key's
 * receipts and usage errors.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { startOperationsHttpServer } from '../../src/adapters/ops/http-server.js';
import { JoinServiceMetrics } from '../../src/adapters/ops/metrics.js';
import { ReceiptKey } from '../../src/adapters/receipts/receipt-key.js';
import { run } from '../../src/app/cli/receipt.js';
import { buildReceiptClaims } from '../../src/domain/receipts.js';
import { captureStdio } from '../support/stdio.js';
import { useTmpDirs } from '../support/tmp.js';

const stdio = captureStdio();
const tmp = useTmpDirs('confboot-receipt-cli-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup() {
  const dir = tmp();
  const key = await ReceiptKey.loadOrGenerate(join(dir, 'key.pem'));
  const receipt = await key.sign(
    buildReceiptClaims(
      {
        rpc: 'IssueJoinTicket',
        nodeName: 'worker-7',
        diskUuid: '11111111-2222-4333-8444-555555555555',
        peer: '127.0.0.17:5000',
        variant: 'qemu-vtpm',
        checks: [{ name: 'quote-signature', ok: true }],
        warnings: [],
        nonce: new Uint8Array(32),
        userData: new Uint8Array(32),
      },
      { issuedAt: new Date('2026-11-26T00:00:00Z'), build: 'confboot test' },
    ),
  );
  const jwksPath = join(dir, 'jwks.json');
  writeFileSync(jwksPath, JSON.stringify(key.jwks()));
  const receiptPath = join(dir, 'receipt.jwt');
  writeFileSync(receiptPath, `${receipt}\n`);
  return { dir, key, receipt, jwksPath, receiptPath };
}

describe('confboot receipt verify', () => {
  it('accepts a receipt with the JWKS file and prints its claims (exit 0)', async () => {
    const s = await setup();
    expect(await run(['verify', '--jwks', s.jwksPath, s.receiptPath])).toBe(0);
    expect(stdio.stdout()).toContain(`receipt valid: signed ES256 by key ${s.key.keyId}`);
    expect(stdio.stdout()).toContain('node worker-7');
    stdio.clearStdout();
    expect(await run(['verify', '--json', '--jwks', s.jwksPath, s.receiptPath])).toBe(0);
    const out = JSON.parse(stdio.stdout()) as { valid: boolean; claims: Record<string, unknown> };
    expect(out.valid).toBe(true);
    expect(out.claims['confboot.receipt']).toMatchObject({ node: 'worker-7', measurementSet: 'default' });
  });

  it('accepts it with the JWKS served by the operations HTTP server on loopback', async () => {
    const s = await setup();
    const http = await startOperationsHttpServer({
      host: '127.0.0.1',
      port: 0,
      metrics: new JoinServiceMetrics({ processMetrics: false }),
      readiness: () => ({}),
      logger: silentLogger,
      jwks: () => s.key.jwks(),
    });
    cleanups.push(() => http.close());
    const url = `http://127.0.0.1:${http.port}/.well-known/jwks.json`;
    expect(await run(['verify', '--jwks', url, s.receiptPath])).toBe(0);
    // A URL that serves no JWKS: the receipt cannot be checked (exit 1).
    expect(await run(['verify', '--jwks', `http://127.0.0.1:${http.port}/nope`, s.receiptPath])).toBe(1);
    expect(stdio.stderr()).toContain('HTTP 404');
  });

  it('refuses a changed receipt and one signed by another key (exit 1)', async () => {
    const s = await setup();
    const i = Math.floor(s.receipt.length / 2);
    const changed = s.receipt.slice(0, i) + (s.receipt[i] === 'A' ? 'B' : 'A') + s.receipt.slice(i + 1);
    writeFileSync(s.receiptPath, changed);
    expect(await run(['verify', '--jwks', s.jwksPath, s.receiptPath])).toBe(1);
    expect(stdio.stderr()).toContain('receipt is NOT valid');
    const other = await ReceiptKey.loadOrGenerate(join(s.dir, 'other.pem'));
    writeFileSync(join(s.dir, 'other.json'), JSON.stringify(other.jwks()));
    writeFileSync(s.receiptPath, s.receipt);
    expect(await run(['verify', '--jwks', join(s.dir, 'other.json'), s.receiptPath])).toBe(1);
  });

  it.each([
    ['no receipt', ['verify', '--jwks', 'j.json']],
    ['two receipts', ['verify', '--jwks', 'j.json', 'a', 'b']],
    ['no --jwks', ['verify', 'r.jwt']],
    ['an unknown flag', ['verify', '--jwks', 'j.json', '--nope', 'r.jwt']],
    ['a missing receipt file', ['verify', '--jwks', 'j.json', '/nonexistent/r.jwt']],
  ])('%s is a usage error (exit 2)', async (_name, argv) => {
    expect(await run(argv)).toBe(2);
  });

  it('--help prints the usage (exit 0)', async () => {
    expect(await run(['verify', '--help'])).toBe(0);
    expect(stdio.stdout()).toContain('confboot receipt verify --jwks FILE|URL');
  });
});
