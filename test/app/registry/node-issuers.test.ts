/**
 * The node's aws-nitro-tpm issuer as the variant registry builds it, on a REAL swtpm with a FAKE
 * IMDSv2 on loopback (EC2 cannot exist here). The NitroTPM vendor command cannot succeed on
 * swtpm (there is no Nitro system here; swtpm even refuses the 8 KiB NV index the exchange defines,
 * its limit is 2 KiB), so the test shows the wiring up to that point: the identity is read, the
 * SHA-384 bank can be quoted, and the NitroTPM exchange is attempted, whose failure fails the issue
 * with a clear error instead of yielding a document without AWS's.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantEntry, variantOid } from '../../../src/app/registry/index.js';
import type { NodeConfig } from '../../../src/app/registry/node-config.js';

let swtpm: SwtpmInstance;
let imds: Server;
const seen: string[] = [];

beforeAll(async () => {
  swtpm = await startSwtpm();
  imds = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.end('token');
    if (
      req.url === '/latest/dynamic/instance-identity/document' &&
      req.headers['x-aws-ec2-metadata-token'] === 'token'
    )
      return void res.end(JSON.stringify({ region: 'eu-central-1', imageId: 'ami-0123456789abcdef0' }));
    res.writeHead(404).end();
  });
  await new Promise<void>((ok) => imds.listen(0, '127.0.0.1', () => ok()));
}, 60_000);
afterAll(async () => {
  await swtpm?.stop();
  await new Promise<void>((ok) => (imds ? imds.close(() => ok()) : ok()));
});

it("registry aws-nitro-tpm issuer on a REAL swtpm with a FAKE IMDS: reads the identity, then asks the NitroTPM for AWS's document (refused: swtpm has no Nitro system, cannot run here)", async () => {
  const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  const config = {
    csp: 'aws',
    variant: 'aws-nitro-tpm',
    tcti: swtpm.tcti,
    metadata: { baseUrl: `http://127.0.0.1:${(imds.address() as AddressInfo).port}` },
  } as unknown as NodeConfig;
  const issuer = await variantEntry('aws-nitro-tpm').issuer({ config, tpm });
  expect([issuer.variant, issuer.oid]).toEqual(['aws-nitro-tpm', variantOid('aws-nitro-tpm')]);
  const err = await issuer.issue(new Uint8Array(32), new Uint8Array(32)).catch((e: unknown) => e);
  expect(String((err as Error).message)).toMatch(
    /^issuing aws-nitro-tpm attestation: exchanging a vendor command through a TPM NV index/,
  );
  expect(seen).toEqual(['PUT /latest/api/token', 'GET /latest/dynamic/instance-identity/document']);
});

it('quotes the SHA-384 bank the NitroTPM document is compared with (REAL swtpm)', async () => {
  const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  const q = await tpm.quoteBank('sha384', new Uint8Array(32).fill(7), [0, 4, 15]);
  expect([...q.pcrs.keys()]).toEqual([0, 4, 15]);
  for (const v of q.pcrs.values()) expect(v.length).toBe(48);
});
