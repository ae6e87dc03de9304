/**
 * `confboot init` against a node with a real swtpm and the real vTPM issuer: the CLI verifies the
 * node's TPM quote before it sends the master secret. The node's init handler is a stand-in that
 * records the request (the real init flow has its own tests and runs in the demo).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createQemuVtpmIssuer } from '../../src/adapters/attestation/vtpm/issuer.js';
import type { AttestedGrpcServer } from '../../src/adapters/grpc/attested-server.js';
import { createInitServer } from '../../src/adapters/grpc/init-server.js';
import { parseClusterKmsUri } from '../../src/adapters/grpc/kms-uri.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { Tpm2ToolsTpm } from '../../src/adapters/tpm/tpm2-tools-tpm.js';
import { run } from '../../src/app/cli/init.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
  TAMPERED_BOOT,
} from '../../src/app/demo/boot-measurements.js';
import type { InitRequest } from '../../src/ports/types.js';
import { useSwtpm } from '../support/swtpm.js';
import { useTmpDirs } from '../support/tmp.js';

const tmp = useTmpDirs();
const swtpm = useSwtpm();
const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const s of servers.splice(0)) await s.shutdown(1000);
});

function capture() {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    err += String(c);
    return true;
  });
  return { out: () => out, err: () => err };
}

async function node(boot: typeof GOOD_BOOT) {
  const instance = await swtpm();
  const tpm = new Tpm2ToolsTpm({ tcti: instance.tcti });
  await measureBoot(tpm, boot);
  const requests: InitRequest[] = [];
  const server = createInitServer({
    issuer: createQemuVtpmIssuer(tpm),
    clock: new SystemClock(),
    handler: {
      async *init(request) {
        requests.push(request);
        yield {
          kind: 'success',
          result: {
            kubeconfig: new TextEncoder().encode('kind: Config\n'),
            clusterId: new Uint8Array(32).fill(7),
          },
        };
      },
    },
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { endpoint: `127.0.0.1:${port}`, requests };
}

async function files() {
  const dir = tmp();
  const config = join(dir, 'attestation.json');
  await writeFile(config, JSON.stringify(expectedAttestationConfig()));
  const initSecret = join(dir, 'init-secret');
  await writeFile(initSecret, 'the-init-secret');
  return { dir, config, initSecret, kubeconfig: join(dir, 'admin.conf') };
}

const flags = (f: Awaited<ReturnType<typeof files>>, endpoint: string) => [
  '--endpoint',
  endpoint,
  '--attestation-config',
  f.config,
  '--init-secret-file',
  f.initSecret,
  '--master-secret-file',
  join(f.dir, 'master.json'),
  '--measurement-salt-file',
  join(f.dir, 'salt.bin'),
  '--kubeconfig',
  f.kubeconfig,
];

describe('confboot init (real swtpm quote, stand-in init handler)', () => {
  it('verifies the node, sends the master secret in kms_uri, writes the kubeconfig and prints the cluster ID', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files();
    const io = capture();
    expect(await run(flags(f, n.endpoint))).toBe(0);
    expect(io.out()).toContain(`Cluster ID: ${'07'.repeat(32)}`);
    expect(await readFile(f.kubeconfig, 'utf8')).toBe('kind: Config\n');
    const [req] = n.requests;
    const master = JSON.parse(await readFile(join(f.dir, 'master.json'), 'utf8'));
    const fromUri = parseClusterKmsUri(req!.kmsUri);
    expect(fromUri.masterSecret.toString('base64')).toBe(master.key);
    expect(fromUri.salt.toString('base64')).toBe(master.salt);
    expect(Buffer.from(req!.measurementSalt)).toEqual(await readFile(join(f.dir, 'salt.bin')));
    expect(new TextDecoder().decode(req!.initSecret)).toBe('the-init-secret');
    expect(io.err()).not.toContain(master.key);
  });

  it('refuses a node whose PCRs differ, shows expected vs actual, and sends nothing', async () => {
    const n = await node(TAMPERED_BOOT);
    const f = await files();
    const io = capture();
    expect(await run(flags(f, n.endpoint))).toBe(1);
    expect(n.requests).toHaveLength(0);
    expect(io.err()).toMatch(/PCR12: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
  });

  it.each([
    ['only PCR 15', { 15: { expected: '00'.repeat(32), warnOnly: false } }],
    [
      'only registers zero on every machine',
      Object.fromEntries([8, 11, 13, 15].map((i) => [i, { expected: '00'.repeat(32), warnOnly: false }])),
    ],
    [
      'the image PCRs but no PCR 15',
      Object.fromEntries(
        Object.entries(expectedAttestationConfig().measurements).filter(([i]) => i !== '15'),
      ),
    ],
  ])(
    'a config that enforces %s: exits 2 naming the opt-in, contacts no node, sends nothing',
    async (_name, measurements) => {
      const n = await node(GOOD_BOOT);
      const f = await files();
      await writeFile(f.config, JSON.stringify({ measurements }));
      const io = capture();
      expect(await run(flags(f, n.endpoint))).toBe(2);
      expect(io.err()).toContain('--allow-weak-measurement-policy');
      expect(n.requests).toHaveLength(0);
      expect(io.err()).not.toMatch(/Connecting to/);
    },
  );

  it('with --allow-weak-measurement-policy a weak config is used, with a SECURITY line', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files();
    const weak = Object.fromEntries(
      Object.entries(expectedAttestationConfig().measurements).filter(([i]) => i !== '15'),
    );
    await writeFile(f.config, JSON.stringify({ measurements: weak }));
    const io = capture();
    expect(await run([...flags(f, n.endpoint), '--allow-weak-measurement-policy'])).toBe(0);
    expect(io.err()).toMatch(/init: SECURITY: .*node-lock register PCR 15/);
    expect(n.requests).toHaveLength(1);
  });

  it.each([
    ['a missing attestation config', ['--attestation-config', '/nonexistent/config.json']],
    ['the dummy variant', ['--variant', 'dummy']],
  ])('exits 2 on %s', async (_name, extra) => {
    const f = await files();
    capture();
    expect(await run([...flags(f, '127.0.0.1:1'), ...extra])).toBe(2);
  });
});
