/**
 * `confboot receipt verify` and `receipt jwks` through run(): a receipt from a real receipt key, its
 * JWKS from a file, from the join service's operations HTTP server on loopback and from a server
 * that never stops sending; pins, statuses, high-S copies, changed receipts, another key's receipts
 * and usage errors; the JWKS read from the receipt key Secret through a Kubernetes API server.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { startOperationsHttpServer } from '../../../src/adapters/ops/http-server.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { flipS } from '../../../src/adapters/receipts/ecdsa-low-s.js';
import { generateReceiptKeyPem, ReceiptKey } from '../../../src/adapters/receipts/receipt-key.js';
import { signingKeyPin } from '../../../src/adapters/receipts/receipt-key-pin.js';
import { run } from '../../../src/app/cli/receipt.js';
import { receiptKeySecret } from '../../../src/app/manifests/join-service.js';
import { buildReceiptClaims } from '../../../src/domain/receipts.js';
import { SsaApiServer } from '../../support/ssa-api-server.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const stdio = captureStdio();
const tmp = useTmpDirs('confboot-receipt-cli-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Claims of a receipt for worker-7; with `warnings`, a warn-only measurement differed (status warning). */
const claimsOf = (options: { warnings?: boolean }) =>
  buildReceiptClaims(
    {
      rpc: 'IssueJoinTicket',
      nodeName: 'worker-7',
      diskUuid: '11111111-2222-4333-8444-555555555555',
      peer: '127.0.0.17:5000',
      variant: 'qemu-vtpm',
      checks: [
        { name: 'quote-signature', ok: true },
        { name: 'measurements', ok: true },
      ],
      warnings: options.warnings
        ? [{ index: 9, expected: new Uint8Array(32), actual: new Uint8Array(32).fill(1), warnOnly: true }]
        : [],
      nonce: new Uint8Array(32),
      userData: new Uint8Array(32),
    },
    { issuedAt: new Date('2026-11-26T00:00:00Z'), build: 'confboot test' },
  );

async function setup(options: { warnings?: boolean } = {}) {
  const dir = tmp();
  const key = await ReceiptKey.loadOrGenerate(join(dir, 'key.pem'));
  const receipt = await key.sign(claimsOf(options));
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
    const out = (
      JSON.parse(stdio.stdout()) as { result: { valid: boolean; claims: Record<string, unknown> } }
    ).result;
    expect(out.valid).toBe(true);
    expect(out.claims['confboot.receipt']).toMatchObject({ node: 'worker-7', measurementSet: 'default' });
  });

  it('accepts it from the operations HTTP server on loopback only with --insecure-jwks-url and a pin', async () => {
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
    const pin = await signingKeyPin(s.key.jwks());
    // Plain HTTP without the opt-in: refused before anything is fetched (usage, exit 2).
    expect(await run(['verify', '--jwks', url, `--kid=${pin.kid}`, s.receiptPath])).toBe(2);
    expect(stdio.stderr()).toContain('is plain HTTP');
    // A URL without a pin: whoever answers would decide the key (exit 2).
    expect(await run(['verify', '--jwks', url, '--insecure-jwks-url', s.receiptPath])).toBe(2);
    expect(stdio.stderr()).toContain('pin the key with --kid or --jwks-sha256');
    expect(
      await run(['verify', '--jwks', url, '--insecure-jwks-url', `--kid=${pin.kid}`, s.receiptPath]),
    ).toBe(0);
    expect(
      await run([
        'verify',
        '--jwks',
        url,
        '--insecure-jwks-url',
        '--jwks-sha256',
        pin.jwksSha256,
        s.receiptPath,
      ]),
    ).toBe(0);
    expect(stdio.stdout()).toContain(`jwks-sha256 ${pin.jwksSha256}, pinned`);
    // A URL that serves no JWKS: the receipt cannot be checked (exit 1).
    expect(
      await run([
        'verify',
        '--jwks',
        `http://127.0.0.1:${http.port}/nope`,
        '--insecure-jwks-url',
        `--kid=${pin.kid}`,
        s.receiptPath,
      ]),
    ).toBe(1);
    expect(stdio.stderr()).toContain('HTTP 404');
  });

  it('a wrong --jwks-sha256 or --kid pin is refused (exit 1); the right one passes', async () => {
    const s = await setup();
    const pin = await signingKeyPin(s.key.jwks());
    const other = await signingKeyPin((await ReceiptKey.loadOrGenerate(join(s.dir, 'other.pem'))).jwks());
    expect(
      await run(['verify', '--jwks', s.jwksPath, '--jwks-sha256', other.jwksSha256, s.receiptPath]),
    ).toBe(1);
    expect(stdio.stderr()).toContain('is not the pinned thumbprint');
    expect(await run(['verify', '--jwks', s.jwksPath, `--kid=${other.kid}`, s.receiptPath])).toBe(1);
    expect(stdio.stderr()).toContain('is not the pinned key ID');
    expect(
      await run([
        'verify',
        '--jwks',
        s.jwksPath,
        `--kid=${pin.kid}`,
        '--jwks-sha256',
        pin.jwksSha256,
        s.receiptPath,
      ]),
    ).toBe(0);
    expect(await run(['verify', '--jwks', s.jwksPath, '--jwks-sha256', 'abc', s.receiptPath])).toBe(2);
  });

  it('statuses below --require-status (default affirming) are refused (exit 1)', async () => {
    const s = await setup({ warnings: true });
    expect(await run(['verify', '--jwks', s.jwksPath, s.receiptPath])).toBe(1);
    expect(stdio.stderr()).toContain('measurements is warning; --require-status affirming');
    stdio.clearStdout();
    expect(await run(['verify', '--json', '--jwks', s.jwksPath, s.receiptPath])).toBe(1);
    expect(JSON.parse(stdio.stdout())).toMatchObject({ status: 'refused', result: { valid: false } });
    expect(await run(['verify', '--jwks', s.jwksPath, '--require-status', 'warning', s.receiptPath])).toBe(0);
    expect(await run(['verify', '--jwks', s.jwksPath, '--require-status', 'great', s.receiptPath])).toBe(2);
  });

  it('a JWKS file or receipt over 64 KiB is a usage error (exit 2)', async () => {
    const s = await setup();
    const big = join(s.dir, 'big');
    writeFileSync(big, Buffer.alloc(64 * 1024 + 1, 0x20));
    expect(await run(['verify', '--jwks', big, s.receiptPath])).toBe(2);
    expect(stdio.stderr()).toContain(`JWKS ${big} is larger than 65536 bytes`);
    expect(await run(['verify', '--jwks', s.jwksPath, big])).toBe(2);
    expect(stdio.stderr()).toContain(`receipt ${big} is larger than 65536 bytes`);
  });

  it('a high-S copy of a valid token is refused (exit 1)', async () => {
    const s = await setup();
    const [h, p, sig] = s.receipt.split('.') as [string, string, string];
    writeFileSync(s.receiptPath, `${h}.${p}.${flipS(Buffer.from(sig, 'base64url')).toString('base64url')}`);
    expect(await run(['verify', '--jwks', s.jwksPath, s.receiptPath])).toBe(1);
    expect(stdio.stderr()).toContain('not low-S');
  });

  it('a JWKS URL that streams past the 64 KiB cap is refused, and the client stops reading (exit 1)', async () => {
    const s = await setup();
    const total = 64 * 1024 * 1024;
    let written = 0;
    let resolveUrl: (url: string) => void = () => {};
    const urlOf = new Promise<string>((r) => {
      resolveUrl = r;
    });
    const ended = new Promise<'closed early' | 'sent all'>((resolveEnd) => {
      const server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.on('close', () => resolveEnd(written < total ? 'closed early' : 'sent all'));
        const chunk = Buffer.alloc(16 * 1024, 0x20);
        const pump = () => {
          while (written < total && !res.destroyed) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          if (written >= total) res.end();
        };
        res.write('{"keys": [');
        pump();
      });
      cleanups.push(
        () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      );
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        resolveUrl(`http://127.0.0.1:${port}/jwks.json`);
      });
    });
    const url = await urlOf;
    expect(
      await run(['verify', '--jwks', url, '--insecure-jwks-url', `--kid=${s.key.keyId}`, s.receiptPath]),
    ).toBe(1);
    expect(stdio.stderr()).toContain('larger than 65536 bytes');
    expect(await ended).toBe('closed early');
    expect(written).toBeLessThan(total);
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
    expect(stdio.stdout()).toContain('Usage: confboot receipt verify [options] RECEIPT');
  });
});

describe('confboot receipt jwks', () => {
  const apis: SsaApiServer[] = [];
  afterEach(async () => {
    for (const a of apis.splice(0)) await a.stop();
  });

  async function cluster(withKey: boolean) {
    const dir = tmp();
    const api = new SsaApiServer();
    apis.push(api);
    const kubeconfig = join(dir, 'admin.conf');
    writeFileSync(kubeconfig, api.kubeconfig(await api.start()));
    const pem = generateReceiptKeyPem();
    const secret = receiptKeySecret(pem);
    if (withKey)
      api.objects.set(
        `/api/v1/namespaces/${secret.metadata?.namespace}/secrets/${secret.metadata?.name}`,
        secret,
      );
    return { dir, kubeconfig, pem };
  }

  it("prints the Secret's public JWKS and its pins, and verify accepts a receipt of that key with them", async () => {
    const c = await cluster(true);
    expect(await run(['jwks', '--kubeconfig', c.kubeconfig])).toBe(0);
    const printed = JSON.parse(stdio.stdout()) as { keys: Array<Record<string, unknown>> };
    writeFileSync(join(c.dir, 'key.pem'), c.pem);
    const key = await ReceiptKey.load(join(c.dir, 'key.pem'));
    expect(printed).toEqual(key.jwks());
    expect(printed.keys[0]).not.toHaveProperty('d');
    expect(stdio.stdout() + stdio.stderr()).not.toContain(c.pem.split('\n')[1] as string);
    const kid = /Receipt key kid: (\S+)/.exec(stdio.stderr())?.[1];
    const sha = /Receipt key jwks-sha256: ([0-9a-f]{64})/.exec(stdio.stderr())?.[1];
    expect(kid).toBe(key.keyId);
    writeFileSync(join(c.dir, 'jwks.json'), JSON.stringify(printed));
    const receipt = join(c.dir, 'r.jwt');
    writeFileSync(receipt, await key.sign(claimsOf({})));
    stdio.clearStdout();
    expect(
      await run([
        'verify',
        '--jwks',
        join(c.dir, 'jwks.json'),
        `--kid=${String(kid)}`,
        '--jwks-sha256',
        String(sha),
        receipt,
      ]),
    ).toBe(0);
  });

  it('a cluster without the receipt key Secret: nothing printed on stdout (exit 1)', async () => {
    const c = await cluster(false);
    expect(await run(['jwks', '--kubeconfig', c.kubeconfig])).toBe(1);
    expect(stdio.stdout()).toBe('');
    expect(stdio.stderr()).toContain('join-service-receipt-key does not exist');
  });

  it('--help prints the usage (exit 0)', async () => {
    expect(await run(['jwks', '--help'])).toBe(0);
    expect(stdio.stdout()).toContain('confboot receipt jwks');
  });
});
