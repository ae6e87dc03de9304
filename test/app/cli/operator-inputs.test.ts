/**
 * `confboot init` and `confboot recover` trust a qemu-vtpm node's attestation key by the join
 * service's rule (src/app/registry/validator-deps.ts): only the key `--qemu-ak-registry` registers
 * for the node's address. Without a registry, or without `--variant`, they refuse to run (exit 2)
 * before any connection (a plain TCP listener records whether one arrived). With the registry the
 * VM whose AK is registered receives the secret, and a second real swtpm booted the same way (PCRs
 * equal, PCR 15 zero: a software TPM replaying the image's public measurements) receives nothing.
 * `--trust-ak-as-carried` is the explicit opt-in, printed as a SECURITY line. mini's operator
 * programs (src/testbed/mini/host/{init,recover}-entry.ts, bundled and run as mini runs them, here
 * without the network namespace) apply the same rule with the identities file.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { createInitServer } from '../../../src/adapters/grpc/init-server.js';
import { AttestedRecoveryEndpoint } from '../../../src/adapters/grpc/recover.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { run as runInit } from '../../../src/app/cli/init.js';
import { run as runRecover } from '../../../src/app/cli/recover.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { InitRequest } from '../../../src/ports/types.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
} from '../../../src/testbed/demo/boot-measurements.js';
import { bundleEntry } from '../../../src/testbed/mini/bundle.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-operator-ak-');
const clock = new SystemClock();
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of cleanups.splice(0).reverse()) await c();
});

function capture(): { out: () => string; err: () => string } {
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

/** The operator's files: the image's attestation config, an init secret, a master-secret file. */
async function operatorFiles(registry?: Record<string, { ip: string; attestationKeyPublic: string }>) {
  const dir = tmp();
  const config = join(dir, 'attestation.json');
  await writeFile(config, JSON.stringify(expectedAttestationConfig()));
  const initSecret = join(dir, 'init-secret');
  await writeFile(initSecret, 'the-init-secret');
  const master = join(dir, 'master.json');
  await writeFile(
    master,
    JSON.stringify({
      key: Buffer.alloc(32, 1).toString('base64'),
      salt: Buffer.alloc(32, 2).toString('base64'),
    }),
  );
  const akRegistry = join(dir, 'ak-registry.json');
  if (registry) await writeFile(akRegistry, JSON.stringify(registry));
  return { dir, config, initSecret, master, akRegistry };
}

type Files = Awaited<ReturnType<typeof operatorFiles>>;

const initArgs = (f: Files, endpoint: string) => [
  ...['--endpoint', endpoint, '--attestation-config', f.config, '--init-secret-file', f.initSecret],
  ...['--master-secret-file', f.master, '--measurement-salt-file', join(f.dir, 'salt.bin')],
  ...['--kubeconfig', join(f.dir, 'admin.conf'), '--no-apply', '--timeout-seconds', '60'],
];

const recoverArgs = (f: Files, endpoint: string) => [
  ...['--endpoint', endpoint, '--attestation-config', f.config, '--master-secret-file', f.master],
  ...['--timeout-seconds', '60'],
];

describe('without the AK rule settled, init and recover contact no node (exit 2)', () => {
  /** A TCP listener that counts the connections it receives. */
  async function listener(): Promise<{ endpoint: string; connections: () => number }> {
    let connections = 0;
    const server: Server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as { port: number };
    return { endpoint: `127.0.0.1:${port}`, connections: () => connections };
  }

  const commands = [
    ['init', runInit, initArgs],
    ['recover', runRecover, recoverArgs],
  ] as const;

  it.each(commands)('%s --variant qemu-vtpm without --qemu-ak-registry', async (name, run, args) => {
    const target = await listener();
    const f = await operatorFiles();
    const io = capture();
    expect(await run([...args(f, target.endpoint), '--variant', 'qemu-vtpm'])).toBe(2);
    expect(io.err()).toContain('qemu-vtpm needs the registered attestation keys (--qemu-ak-registry F)');
    expect(io.err()).toContain('--trust-ak-as-carried');
    expect(io.err()).not.toContain('Connecting to');
    expect(target.connections()).toBe(0);
    if (name === 'init') expect(io.out()).not.toContain('Cluster ID');
  });

  it.each(commands)('%s --variant azure-trustedlaunch without --azure-ak-roots', async (_name, run, args) => {
    const target = await listener();
    const f = await operatorFiles();
    const io = capture();
    expect(await run([...args(f, target.endpoint), '--variant', 'azure-trustedlaunch'])).toBe(2);
    expect(io.err()).toContain('azure-trustedlaunch needs the trusted AK roots (--azure-ak-roots F, PEM)');
    expect(target.connections()).toBe(0);
  });

  it.each(commands)('%s without --variant', async (_name, run, args) => {
    const target = await listener();
    const f = await operatorFiles();
    const io = capture();
    expect(await run([...args(f, target.endpoint), '--qemu-ak-registry', f.akRegistry])).toBe(2);
    expect(io.err()).toContain('missing required option --variant');
    expect(target.connections()).toBe(0);
  });
});

/** A node with a real swtpm booted like the demo image, and the production qemu-vtpm issuer. */
interface SwtpmNode {
  issuer: Issuer;
  akPub: Uint8Array;
  pcrs: Map<number, Uint8Array>;
}

describe('with --qemu-ak-registry: the registered VM is trusted, a software TPM with the same PCRs is not (real swtpm quotes)', () => {
  const swtpms: SwtpmInstance[] = [];
  let vm: SwtpmNode;
  let impostor: SwtpmNode;

  async function bootedNode(): Promise<SwtpmNode> {
    const swtpm = await startSwtpm();
    swtpms.push(swtpm);
    const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
    await measureBoot(tpm, GOOD_BOOT);
    return {
      issuer: createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') }),
      akPub: await tpm.attestationKeyPublic(),
      pcrs: await tpm.readPcrs([4, 9, 12, 15]),
    };
  }

  beforeAll(async () => {
    vm = await bootedNode();
    impostor = await bootedNode();
    return async () => {
      for (const s of swtpms) await s.stop();
    };
  }, 60_000);

  /** The registry mini and the metadata server write: the VM at 127.0.0.1 with its AK. */
  const registry = () => ({
    'control-plane-0': { ip: '127.0.0.1', attestationKeyPublic: Buffer.from(vm.akPub).toString('base64') },
  });

  it('the two TPMs differ only in their attestation key: same PCRs, PCR 15 zero', () => {
    expect(Buffer.from(vm.akPub).equals(Buffer.from(impostor.akPub))).toBe(false);
    const hex = (m: Map<number, Uint8Array>) => [...m].map(([i, v]) => [i, Buffer.from(v).toString('hex')]);
    expect(hex(impostor.pcrs)).toEqual(hex(vm.pcrs));
    expect(Buffer.from(vm.pcrs.get(15) ?? []).toString('hex')).toBe('00'.repeat(32));
  });

  async function initNode(node: SwtpmNode) {
    const requests: InitRequest[] = [];
    const server: AttestedGrpcServer = createInitServer({
      issuer: node.issuer,
      clock,
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
    cleanups.push(() => server.shutdown(1000));
    const port = await server.listen('127.0.0.1', 0);
    return { endpoint: `127.0.0.1:${port}`, requests };
  }

  async function recoveryNode(node: SwtpmNode, busyAnswers = 0) {
    const kinds: string[] = [];
    let busy = busyAnswers;
    const stop = new AbortController();
    let onListening!: (port: number) => void;
    const listening = new Promise<number>((r) => {
      onListening = r;
    });
    const serving = new AttestedRecoveryEndpoint({
      issuer: node.issuer,
      clock,
      host: '127.0.0.1',
      port: 0,
      shutdownGraceMs: 1000,
      onListening,
    }).serve(
      {
        async recover(request) {
          kinds.push(request.kind);
          if (busy-- > 0)
            throw new ConfbootError(
              'resource-exhausted',
              'recovery: 3 attempts already wait to open the state disk',
            );
          return { recovered: true, received: 0, threshold: 1, total: 1, message: 'recovered' };
        },
      },
      { signal: stop.signal },
    );
    cleanups.push(async () => {
      stop.abort();
      await serving;
    });
    return { endpoint: `127.0.0.1:${await listening}`, kinds };
  }

  const withRegistry = (f: Files) => ['--variant', 'qemu-vtpm', '--qemu-ak-registry', f.akRegistry];

  it('init sends the master secret to the registered VM', { timeout: 120_000 }, async () => {
    const node = await initNode(vm);
    const f = await operatorFiles(registry());
    const io = capture();
    expect(await runInit([...initArgs(f, node.endpoint), ...withRegistry(f)])).toBe(0);
    expect(node.requests).toHaveLength(1);
    expect(io.out()).toContain(`Cluster ID: ${'07'.repeat(32)}`);
    expect(io.err()).not.toContain('SECURITY');
  });

  it('init refuses the software TPM with the same PCRs and sends it nothing (exit 1)', {
    timeout: 120_000,
  }, async () => {
    const node = await initNode(impostor);
    const f = await operatorFiles(registry());
    const io = capture();
    expect(await runInit([...initArgs(f, node.endpoint), ...withRegistry(f)])).toBe(1);
    expect(node.requests).toHaveLength(0);
    expect(io.err()).toMatch(/ak-trust|not the one registered for control-plane-0/);
  });

  it('recover sends the master secret to the registered VM', { timeout: 120_000 }, async () => {
    const node = await recoveryNode(vm);
    const f = await operatorFiles(registry());
    const io = capture();
    expect(await runRecover([...recoverArgs(f, node.endpoint), ...withRegistry(f)])).toBe(0);
    expect(node.kinds).toEqual(['master-secret']);
    expect(io.out()).toBe('Recovered: recovered\n');
  });

  it('recover sends again while the node answers busy (resource-exhausted), and only once with --retry-seconds 0', {
    timeout: 120_000,
  }, async () => {
    const node = await recoveryNode(vm, 2);
    const f = await operatorFiles(registry());
    const io = capture();
    expect(await runRecover([...recoverArgs(f, node.endpoint), ...withRegistry(f)])).toBe(0);
    // Two busy answers, then the same request was counted: three calls, each attested anew.
    expect(node.kinds).toEqual(['master-secret', 'master-secret', 'master-secret']);
    expect(io.err().match(/Node busy \(.*3 attempts already wait.*\); sending again in/g)).toHaveLength(2);
    expect(io.out()).toBe('Recovered: recovered\n');
    const once = await recoveryNode(vm, 1);
    expect(
      await runRecover([...recoverArgs(f, once.endpoint), ...withRegistry(f), '--retry-seconds', '0']),
    ).toBe(1);
    expect(once.kinds).toEqual(['master-secret']);
  });

  it('recover refuses the software TPM with the same PCRs and sends it nothing (exit 1)', {
    timeout: 120_000,
  }, async () => {
    const node = await recoveryNode(impostor);
    const f = await operatorFiles(registry());
    const io = capture();
    expect(await runRecover([...recoverArgs(f, node.endpoint), ...withRegistry(f)])).toBe(1);
    expect(node.kinds).toEqual([]);
    expect(io.err()).toContain(
      "the document's attestation key is not the one registered for control-plane-0",
    );
  });

  it('--trust-ak-as-carried (no registry) sends to the software TPM too, saying so in a SECURITY line', {
    timeout: 120_000,
  }, async () => {
    const node = await recoveryNode(impostor);
    const f = await operatorFiles();
    const io = capture();
    expect(
      await runRecover([...recoverArgs(f, node.endpoint), '--variant', 'qemu-vtpm', '--trust-ak-as-carried']),
    ).toBe(0);
    expect(node.kinds).toEqual(['master-secret']);
    expect(io.err()).toContain('recover: SECURITY: --trust-ak-as-carried is set');
  });

  /** Bundles mini's host entry `entry` and runs it as mini does (input on stdin, JSON line out). */
  async function runMiniEntry(entry: string, input: unknown): Promise<{ ok: boolean; error?: string }> {
    const bundle = join(tmp(), `${entry.replace(/^host\//, '')}.mjs`);
    await writeFile(bundle, await bundleEntry(entry));
    const grpcPackage = createRequire(import.meta.url).resolve('@grpc/grpc-js/package.json');
    const child = spawn(process.execPath, [bundle], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_PATH: join(dirname(grpcPackage), '..', '..') },
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.resume();
    const closed = new Promise<void>((r) => child.on('close', () => r()));
    child.stdin.end(JSON.stringify(input));
    await closed;
    return JSON.parse(out.trim().split('\n').pop() ?? '') as { ok: boolean; error?: string };
  }

  it("mini's recover entry sends the share to the registered VM only", { timeout: 180_000 }, async () => {
    const f = await operatorFiles(registry());
    const input = (endpoint: string) => ({
      endpoint,
      attestationConfig: expectedAttestationConfig(),
      akRegistryPath: f.akRegistry,
      share: Buffer.from('{"a share"}').toString('base64'),
      timeoutMs: 60_000,
    });
    const good = await recoveryNode(vm);
    expect(await runMiniEntry('host/recover-entry', input(good.endpoint))).toMatchObject({ ok: true });
    expect(good.kinds).toEqual(['share']);
    const fake = await recoveryNode(impostor);
    const refused = await runMiniEntry('host/recover-entry', input(fake.endpoint));
    expect(refused.ok).toBe(false);
    expect(refused.error).toContain(
      "the document's attestation key is not the one registered for control-plane-0",
    );
    expect(fake.kinds).toEqual([]);
  });

  it("mini's init entry sends the master secret to the registered VM only", {
    timeout: 180_000,
  }, async () => {
    const f = await operatorFiles(registry());
    const b64 = (n: number) => Buffer.alloc(32, n).toString('base64');
    const input = (endpoint: string) => ({
      endpoint,
      attestationConfig: expectedAttestationConfig(),
      akRegistryPath: f.akRegistry,
      masterSecret: b64(1),
      masterSalt: b64(2),
      measurementSalt: b64(3),
      initSecret: b64(4),
      timeoutMs: 60_000,
    });
    const good = await initNode(vm);
    // Init succeeds; the master-secret upload after it finds no API server here (not under test).
    await runMiniEntry('host/init-entry', input(good.endpoint));
    expect(good.requests).toHaveLength(1);
    const fake = await initNode(impostor);
    const refused = await runMiniEntry('host/init-entry', input(fake.endpoint));
    expect(refused.ok).toBe(false);
    expect(refused.error).toMatch(/ak-trust|not the one registered for control-plane-0/);
    expect(fake.requests).toHaveLength(0);
  });
});
