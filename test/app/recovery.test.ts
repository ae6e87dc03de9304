/**
 * Reboot and full-outage recovery with real parts: the production `confboot bootstrapper` program
 * (disk mapper first) on a real swtpm (qemu-vtpm attestation, PCR 15 re-marked through tpm2-tools),
 * a real LUKS2 image set up before the "reboot" (keyslot 0 holds the key derived from the master
 * secret, token 0 says initialised; opened through the validated detached header at
 * `--test-passphrase` level: no device-mapper here, `--state-mapping none`), the real QEMU metadata
 * server, real attested TLS on loopback for the rejoin (a join.API server validating qemu-vtpm) and
 * for `confboot recover` (the node attests, the holder validates). Shares are made with the audited
 * Shamir library. kubeadm is not reached: a reopened node is bootstrapped already.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startMetadataServer } from '../../src/adapters/cloud/qemu/metadata-server.js';
import { CryptsetupDisk } from '../../src/adapters/disk/cryptsetup-disk.js';
import type { AttestedGrpcServer } from '../../src/adapters/grpc/attested-server.js';
import { createJoinServer } from '../../src/adapters/grpc/join-server.js';
import { JsonNodeStateStore } from '../../src/adapters/state/json-node-state-store.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { expectedPcr15 } from '../../src/adapters/tpm/pcr15-marker.js';
import { Tpm2ToolsTpm } from '../../src/adapters/tpm/tpm2-tools-tpm.js';
import { run as bootstrapper } from '../../src/app/cli/bootstrapper.js';
import { run as recover } from '../../src/app/cli/recover.js';
import { writeRecoveryShareFiles } from '../../src/app/cli/recovery-share-files.js';
import { buildValidator } from '../../src/app/registry/validators.js';
import { deriveClusterId, deriveDataKey } from '../../src/domain/key-derivation.js';
import type { Validator } from '../../src/ports/validator.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
  TAMPERED_BOOT,
} from '../../src/testbed/demo/boot-measurements.js';
import { dumpMetadata, formatImage } from '../adapters/disk/luks-image.js';
import { joinCallOf } from '../support/join-call.js';
import { freePort } from '../support/net.js';
import { useSwtpm } from '../support/swtpm.js';
import { useTmpDirs } from '../support/tmp.js';

const tmp = useTmpDirs('confboot-recovery-');
const swtpm = useSwtpm();
const clock = new SystemClock();
const MASTER = new Uint8Array(32).fill(0x11);
const SALT = new Uint8Array(32).fill(0x22);
const MEASUREMENT_SALT = new Uint8Array(32).fill(0x33);
const MEASUREMENT_SECRET = deriveDataKey(MASTER, SALT, 'measurementSecret', 32);
const CLUSTER_ID = deriveClusterId(MEASUREMENT_SECRET, MEASUREMENT_SALT);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of cleanups.splice(0).reverse()) await c();
});

function sink(): Writable & { text: () => string } {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  return Object.assign(w, { text: () => Buffer.concat(chunks).toString('utf8') });
}

/** Waits (bounded) until `cond` holds. */
async function waitUntil(what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A node after a reboot: its state disk set up before (key from MASTER), PCR 15 zero again. */
async function rebootedNode(dir: string, role: 'ControlPlane' | 'Worker', boot = GOOD_BOOT) {
  const instance = await swtpm();
  const tpm = new Tpm2ToolsTpm({ tcti: instance.tcti });
  await measureBoot(tpm, boot);
  const image = await formatImage(dir);
  const disk = new CryptsetupDisk({
    devicePath: image.path,
    initialPassphrasePath: image.keyFile,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
  });
  const release = await disk.open();
  const uuid = await disk.uuid();
  await disk.updatePassphrase(deriveDataKey(MASTER, SALT, uuid, 32));
  await release();
  const nodeState = join(dir, 'node_state.json');
  await new JsonNodeStateStore({ path: nodeState }).write({ role, measurementSalt: MEASUREMENT_SALT });
  return { tcti: instance.tcti, tpm, image, uuid, nodeState };
}

/** The real QEMU metadata server: control-plane-0 at 127.0.0.1, worker-0 at 127.0.0.2. */
async function metadataServer(dir: string): Promise<string> {
  const leases = join(dir, 'leases');
  await writeFile(
    leases,
    '0 52:54:00:00:00:01 127.0.0.1 control-plane-0 *\n0 52:54:00:00:00:02 127.0.0.2 worker-0 *\n',
  );
  const server = await startMetadataServer({ leasesFile: leases, host: '127.0.0.1', port: 0 });
  cleanups.push(() => server.close());
  return `http://127.0.0.1:${server.port}`;
}

async function attestationConfig(dir: string): Promise<{ path: string; validator: () => Validator }> {
  const path = join(dir, 'attestation.json');
  await writeFile(path, JSON.stringify(expectedAttestationConfig()));
  const bytes = await readFile(path);
  return { path, validator: () => buildValidator('qemu-vtpm', bytes, { clock }) };
}

/** A join service on loopback that issues rejoin tickets from MASTER to nodes its validator accepts. */
async function rejoinService(validator: Validator, port: number) {
  const rejoins: string[] = [];
  let validations = 0;
  const counting: Validator = {
    ...validator,
    oid: validator.oid,
    validate: (doc, nonce, options) => {
      validations++;
      return validator.validate(doc, nonce, options);
    },
  } as Validator;
  const server: AttestedGrpcServer = createJoinServer({
    validators: [counting],
    clock,
    joinCall: joinCallOf({
      issueJoinTicket: () => Promise.reject(new Error('not used')),
      issueRejoinTicket: async (request) => {
        rejoins.push(request.diskUuid);
        return {
          stateDiskKey: deriveDataKey(MASTER, SALT, request.diskUuid, 32),
          measurementSecret: MEASUREMENT_SECRET,
        };
      },
    }),
  });
  await server.listen('127.0.0.1', port);
  cleanups.push(() => server.shutdown(500));
  return { rejoins, validations: () => validations };
}

function nodeArgs(
  node: { tcti: string; image: { path: string; keyFile: string }; nodeState: string },
  metadataUrl: string,
  localAddress: string,
  joinPort: number,
): string[] {
  return [
    ...['--csp', 'qemu', '--attestation-variant', 'qemu-vtpm', '--tcti', node.tcti],
    ...[
      '--disk',
      node.image.path,
      '--initial-passphrase-file',
      node.image.keyFile,
      '--state-mapping',
      'none',
      // Plain LUKS2 images: no device-mapper here, so no dm-integrity either.
      '--state-disk-integrity',
      'none',
    ],
    ...['--metadata-url', metadataUrl, '--metadata-local-address', localAddress],
    ...['--init-listen', `${localAddress}:0`, '--join-service-port', String(joinPort)],
    ...['--node-state-file', node.nodeState, '--recovery-listen', `${localAddress}:0`],
    ...['--log-level', process.env.RECOVERY_LOG ?? 'silent'],
    // `true` stands in for systemctl (this machine's kubelet and power are never touched).
    ...['--kubelet-restart-command', 'true restart kubelet', '--reboot-command', 'none'],
  ];
}

async function pcr15(tpm: Tpm2ToolsTpm): Promise<string> {
  return hex((await tpm.readPcrs([15])).get(15) as Uint8Array);
}

/** Runs `confboot recover` in-process; resolves with its exit code, stdout and stderr. */
async function runRecover(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    out += String(c);
    return true;
  });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    err += String(c);
    return true;
  });
  try {
    const code = await recover(args);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe('reboot: the disk mapper rejoins (real swtpm, LUKS2, aTLS, metadata server)', () => {
  it('a worker with a disk set up before gets a rejoin ticket, opens its disk, and PCR 15 is the cluster marker again', async () => {
    const dir = tmp();
    const node = await rebootedNode(dir, 'Worker');
    const metadataUrl = await metadataServer(dir);
    const { validator } = await attestationConfig(dir);
    const joinPort = await freePort();
    const service = await rejoinService(validator(), joinPort);
    expect(await pcr15(node.tpm)).toBe('00'.repeat(32));

    const out = sink();
    const code = await bootstrapper(nodeArgs(node, metadataUrl, '127.0.0.2', joinPort), { out });
    expect(out.text()).toBe('Node rejoined: state disk open, PCR 15 marked again, kubelet restarted\n');
    expect(code).toBe(0);
    expect(service.rejoins).toEqual([node.uuid]);
    expect(await pcr15(node.tpm)).toBe(hex(expectedPcr15(CLUSTER_ID)));
    const meta = (await dumpMetadata(node.image.path)) as {
      tokens: Record<string, { diskIsInitialized?: boolean }>;
    };
    expect(meta.tokens['0']?.diskIsInitialized).toBe(true);
  }, 60_000);

  it('refused (changed boot measurements): the disk stays closed, PCR 15 stays zero, the node retries until stopped', async () => {
    const dir = tmp();
    const node = await rebootedNode(dir, 'Worker', TAMPERED_BOOT);
    const metadataUrl = await metadataServer(dir);
    const { validator } = await attestationConfig(dir);
    const joinPort = await freePort();
    const service = await rejoinService(validator(), joinPort);
    const stop = new AbortController();
    const out = sink();
    const exit = bootstrapper(nodeArgs(node, metadataUrl, '127.0.0.2', joinPort), {
      out,
      signal: stop.signal,
    });
    await waitUntil('two refused rejoin attempts', () => service.validations() >= 2);
    stop.abort();
    expect(await exit).toBe(1);
    expect(out.text()).toBe('Disk mapper stopped before the state disk was ready\n');
    expect(service.rejoins).toEqual([]);
    expect(await pcr15(node.tpm)).toBe('00'.repeat(32));
  }, 90_000);
});

describe('full outage: a control plane waits for k-of-n recovery (real swtpm, LUKS2, aTLS, Shamir)', () => {
  async function waitingControlPlane() {
    const dir = tmp();
    const node = await rebootedNode(dir, 'ControlPlane');
    const metadataUrl = await metadataServer(dir);
    const config = await attestationConfig(dir);
    // The holders trust only the AK registered for the control plane's address (--qemu-ak-registry).
    const akPub = Buffer.from(await node.tpm.attestationKeyPublic()).toString('base64');
    await writeFile(
      akRegistryBeside(config.path),
      JSON.stringify({ 'control-plane-0': { ip: '127.0.0.1', attestationKeyPublic: akPub } }),
    );
    // Nothing listens at the join service port: every control plane restarted at once.
    const joinPort = await freePort();
    const shareDir = tmp();
    const shares = await writeRecoveryShareFiles({
      masterSecret: MASTER,
      masterSalt: SALT,
      clusterId: CLUSTER_ID,
      total: 3,
      threshold: 2,
      dir: shareDir,
    });
    const otherDir = tmp();
    const otherCluster = new Uint8Array(32).fill(0xbb);
    const others = await writeRecoveryShareFiles({
      masterSecret: new Uint8Array(32).fill(0x44),
      masterSalt: SALT,
      clusterId: otherCluster,
      total: 3,
      threshold: 2,
      dir: otherDir,
    });
    const start = (signal?: AbortSignal) => {
      let onRecoveryListening!: (port: number) => void;
      const listening = new Promise<number>((r) => {
        onRecoveryListening = r;
      });
      const out = sink();
      const exit = bootstrapper(nodeArgs(node, metadataUrl, '127.0.0.1', joinPort), {
        out,
        onRecoveryListening,
        ...(signal ? { signal } : {}),
      });
      return { out, exit, listening };
    };
    return { dir, node, config, shares, others, otherCluster, start };
  }

  /** The AK registry waitingControlPlane writes next to the attestation config. */
  const akRegistryBeside = (config: string) => join(dirname(config), 'ak-registry.json');
  const akTrust = (config: string) => [
    '--variant',
    'qemu-vtpm',
    '--qemu-ak-registry',
    akRegistryBeside(config),
  ];
  const recoverArgs = (port: number, config: string, share: string) => [
    ...['--endpoint', `127.0.0.1:${port}`, '--attestation-config', config, '--share', share],
    ...['--timeout-seconds', '30', ...akTrust(config)],
  ];

  it('one share leaves it waiting (1 of 2), a share of another cluster is kept apart and told nothing of the first, a second valid share recovers it', async () => {
    const cp = await waitingControlPlane();
    const { out, exit, listening } = cp.start();
    const port = await Promise.race([listening, exit.then((c) => Promise.reject(new Error(`exited ${c}`)))]);

    const first = await runRecover(recoverArgs(port, cp.config.path, cp.shares[0] as string));
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/^Waiting: 1 of 2 received \(share 1 of 3 \(cluster [0-9a-f]{12}…\)\)\n$/);

    const foreign = await runRecover(recoverArgs(port, cp.config.path, cp.others[0] as string));
    expect(foreign.out).toMatch(/^Waiting: 1 of 2 received \(share 1 of 3 \(cluster bbbbbbbbbbbb…\)\)\n$/);

    const second = await runRecover(recoverArgs(port, cp.config.path, cp.shares[2] as string));
    expect(second.code).toBe(0);
    expect(second.out).toMatch(
      new RegExp(`^Recovered: 2 of 2 received; recovered cluster ${hex(CLUSTER_ID).slice(0, 12)}…\\n$`),
    );
    expect(await exit).toBe(0);
    expect(out.text()).toBe('Node was recovered: state disk open, PCR 15 marked again, kubelet restarted\n');
    expect(await pcr15(cp.node.tpm)).toBe(hex(expectedPcr15(CLUSTER_ID)));
  }, 90_000);

  it('K shares of another cluster are refused and dropped; the node keeps waiting and the right shares recover it', async () => {
    const cp = await waitingControlPlane();
    const { exit, listening } = cp.start();
    const port = await listening;
    await runRecover(recoverArgs(port, cp.config.path, cp.others[0] as string));
    const refused = await runRecover(recoverArgs(port, cp.config.path, cp.others[1] as string));
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(
      /the 2 shares of this split \(cluster bbbbbbbbbbbb…\) do not belong to this node/,
    );
    expect(await pcr15(cp.node.tpm)).toBe('00'.repeat(32));
    expect((await runRecover(recoverArgs(port, cp.config.path, cp.shares[1] as string))).code).toBe(0);
    const last = await runRecover(recoverArgs(port, cp.config.path, cp.shares[0] as string));
    expect(last.out + last.err).toMatch(/^Recovered/);
    expect(await exit).toBe(0);
  }, 90_000);

  it('the holder refuses a node whose measurements do not match: nothing is sent (exit 1)', async () => {
    const cp = await waitingControlPlane();
    const { exit, listening } = cp.start();
    const port = await listening;
    const wrong = join(cp.dir, 'wrong.json');
    const config = expectedAttestationConfig() as { measurements: Record<string, unknown> };
    config.measurements['4'] = { expected: 'ff'.repeat(32), warnOnly: false };
    await writeFile(wrong, JSON.stringify(config));
    const r = await runRecover(recoverArgs(port, wrong, cp.shares[0] as string));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/recover: {3}PCR4: expected (ff){32}, got [0-9a-f]{64}/);
    // The node holds nothing: the next valid share is the first.
    const next = await runRecover(recoverArgs(port, cp.config.path, cp.shares[1] as string));
    expect(next.out).toMatch(/^Waiting: 1 of 2 received/);
    expect((await runRecover(recoverArgs(port, cp.config.path, cp.shares[2] as string))).code).toBe(0);
    expect(await exit).toBe(0);
  }, 90_000);

  it('plain form: --master-secret-file recovers the node', async () => {
    const cp = await waitingControlPlane();
    const { exit, listening } = cp.start();
    const port = await listening;
    const secretFile = join(cp.dir, 'master.json');
    await writeFile(
      secretFile,
      JSON.stringify({
        key: Buffer.from(MASTER).toString('base64'),
        salt: Buffer.from(SALT).toString('base64'),
      }),
    );
    const r = await runRecover([
      ...['--endpoint', `127.0.0.1:${port}`, '--attestation-config', cp.config.path],
      ...['--master-secret-file', secretFile, ...akTrust(cp.config.path)],
    ]);
    expect(r.code).toBe(0);
    expect(r.out).toBe('Recovered: recovered with the master secret\n');
    expect(await exit).toBe(0);
  }, 90_000);

  it('fault: a holder disconnecting before its attested TLS completes, and the node restarting with K−1 shares received', async () => {
    const cp = await waitingControlPlane();
    const stop = new AbortController();
    const firstRun = cp.start(stop.signal);
    const port = await firstRun.listening;
    // A holder connects and drops before its attested TLS starts.
    await new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve();
      });
      s.on('error', () => resolve());
    });
    expect((await runRecover(recoverArgs(port, cp.config.path, cp.shares[0] as string))).out).toMatch(
      /^Waiting: 1 of 2 received/,
    );
    // The node restarts with K−1 = 1 share received: shares live in memory only.
    stop.abort();
    expect(await firstRun.exit).toBe(1);
    const secondRun = cp.start();
    const port2 = await secondRun.listening;
    expect((await runRecover(recoverArgs(port2, cp.config.path, cp.shares[1] as string))).out).toMatch(
      /^Waiting: 1 of 2 received/,
    );
    expect((await runRecover(recoverArgs(port2, cp.config.path, cp.shares[0] as string))).out).toMatch(
      /^Recovered/,
    );
    expect(await secondRun.exit).toBe(0);
    expect(await pcr15(cp.node.tpm)).toBe(hex(expectedPcr15(CLUSTER_ID)));
  }, 120_000);
});
