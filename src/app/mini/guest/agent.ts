/**
 * The program a mini node runs inside its VM (bundled into one file and placed in the measured
 * initramfs). It reads its orders from fw_cfg and reports on the second serial port (protocol.ts).
 * Importing this module runs it: it is an entry point only.
 *
 * Before it runs, /init has reported the firmware event log (`measured`). The agent then maps the
 * state disk (disk-mapper.ts) when asked and reports what the metadata server says about this VM.
 *
 * Step `bootstrap` (the cluster): runs the production `confboot bootstrapper --csp qemu
 * --attestation-variant qemu-vtpm` (the CLI bundled in /opt/confboot/cli, kubeadm SIMULATED by
 * /usr/bin/kubeadm) and forwards its log lines; reports PCR 15 while it runs and, once it exits,
 * the state disk as the node sees it (mapping, keyslots, whether the initial passphrase still
 * opens it) and PCR 15. A control plane first starts the SIMULATED Kubernetes API server on :6443
 * and, after init, plays the kubelet: once the operator has created the master-secret Secret it
 * writes it to files in /run and starts the production `confboot key-service` and
 * `confboot join-service` (the join service on :30090, where workers find it), forwarding their
 * log lines, until the host powers the VM off.
 *
 * Step `attest`: one qemu-vtpm attestation document through the kernel's resource manager (TCTI
 * `device:/dev/tpmrm0`), carrying the firmware event log from securityfs, bound to the host's nonce.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createQemuVtpmIssuer, LINUX_EVENT_LOG_PATH } from '../../../adapters/attestation/vtpm/issuer.js';
import { runCryptsetup } from '../../../adapters/disk/cryptsetup-runner.js';
import { FakeKubeApi, MASTER_SECRET_NAME } from '../../../adapters/simulated/simulated-kube-api.js';
import { DEVICE_TCTI, Tpm2ToolsTpm } from '../../../adapters/tpm/tpm2-tools-tpm.js';
import { messageOf } from '../../../ports/errors.js';
import { JOIN_SERVICE_PORT } from '../../defaults.js';
import { mapStateDisk } from './disk-mapper.js';
import {
  type AttestConfig,
  type BootstrapConfig,
  GUEST_CONFIG_PATH,
  type GuestConfig,
  REPORT_PORT,
  REPORT_PREFIX,
  SIMULATED_API_PORT,
} from './protocol.js';

const CLI = '/opt/confboot/cli/main.js';
const RUN_DIR = '/run/confboot';
const NODE_STATE = '/run/state/constellation/node_state.json';
const KEY_SERVICE_LISTEN = '127.0.0.1:9000';

function report(value: Record<string, unknown>): void {
  appendFileSync(REPORT_PORT, `${REPORT_PREFIX}${JSON.stringify(value)}\n`);
}

async function attest(config: AttestConfig): Promise<void> {
  const tpm = new Tpm2ToolsTpm({ tcti: DEVICE_TCTI, timeoutInMs: 120_000 });
  const issuer = createQemuVtpmIssuer(tpm, { eventLogPath: LINUX_EVENT_LOG_PATH });
  const userData = Buffer.from(config.userData ?? '00'.repeat(32), 'hex');
  const document = await issuer.issue(userData, Buffer.from(config.nonce, 'hex'));
  report({ type: 'attestation', tcti: tpm.tcti, document: Buffer.from(document).toString('base64') });
}

/** Starts `node CLI args…`, forwarding every output line as a `log` report; resolves to the exit code. */
function program(source: string, args: string[]): { exit: Promise<number | null> } {
  const child = spawn('/usr/bin/node', [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr])
    createInterface({ input: stream }).on('line', (line) => report({ type: 'log', source, line }));
  report({ type: 'started-program', source, args });
  return {
    exit: new Promise((resolve) => {
      child.on('error', (err) => {
        report({ type: 'log', source, line: `spawn failed: ${err.message}` });
        resolve(null);
      });
      child.on('exit', (code) => resolve(code));
    }),
  };
}

const pcrTpm = new Tpm2ToolsTpm({ tcti: DEVICE_TCTI, timeoutInMs: 120_000 });
async function reportPcr15(when: string): Promise<void> {
  try {
    const value = (await pcrTpm.readPcrs([15])).get(15);
    report({ type: 'pcr15', when, value: value ? Buffer.from(value).toString('hex') : null });
  } catch (err) {
    report({ type: 'pcr15', when, error: (err as Error).message });
  }
}

/** The state disk as the node sees it after the bootstrapper. */
async function reportDiskState(device: string): Promise<void> {
  const status = (await runCryptsetup(['status', 'state'], { timeoutInMs: 60_000 })).stdout;
  const dump = (await runCryptsetup(['luksDump', device], { timeoutInMs: 60_000 })).stdout;
  const keyslots = [...dump.matchAll(/^\s+(\d+): luks2$/gm)].map((m) => Number(m[1]));
  let initialOpens = false;
  try {
    await runCryptsetup(
      ['open', '--test-passphrase', '--key-file', '/run/cryptsetup-keys.d/state.key', device],
      { timeoutInMs: 300_000 },
    );
    initialOpens = true;
  } catch {}
  report({
    type: 'disk-state',
    active: /is active/.test(status),
    cipher: /cipher:\s+(\S+)/.exec(status)?.[1] ?? null,
    keyslots,
    initialPassphraseOpens: initialOpens,
    status: status.trim(),
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The control plane after init: the kubelet's part for the key service and join service pods. */
async function runServices(config: BootstrapConfig, api: FakeKubeApi, ip: string): Promise<void> {
  await mkdir(RUN_DIR, { recursive: true, mode: 0o700 });
  const state = JSON.parse(await readFile(NODE_STATE, 'utf8')) as { MeasurementSalt: string };
  await writeFile(`${RUN_DIR}/measurementSalt`, Buffer.from(state.MeasurementSalt, 'base64'), {
    mode: 0o600,
  });
  await writeFile(`${RUN_DIR}/attestationConfig.json`, JSON.stringify(config.attestationConfig ?? {}));
  await writeFile(`${RUN_DIR}/ak-registry.json`, JSON.stringify(config.akRegistry ?? {}));
  // The operator creates the master secret Secret after init (SIMULATED API server); bounded wait.
  const deadline = Date.now() + 15 * 60_000;
  let secret = api.secrets.get(MASTER_SECRET_NAME);
  while (secret === undefined) {
    if (Date.now() > deadline) throw new Error('the master secret Secret was not created within 15 minutes');
    await sleep(500);
    secret = api.secrets.get(MASTER_SECRET_NAME);
  }
  const data = secret.data as { mastersecret: string; salt: string };
  await writeFile(`${RUN_DIR}/mastersecret`, Buffer.from(data.mastersecret, 'base64'), { mode: 0o600 });
  await writeFile(`${RUN_DIR}/salt`, Buffer.from(data.salt, 'base64'), { mode: 0o600 });
  report({ type: 'master-secret-mounted' });
  const key = program('key-service', [
    'key-service',
    `--master-secret-file=${RUN_DIR}/mastersecret`,
    `--salt-file=${RUN_DIR}/salt`,
    `--listen=${KEY_SERVICE_LISTEN}`,
  ]);
  const join = program('join-service', [
    'join-service',
    '--csp=qemu',
    '--attestation-variant=qemu-vtpm',
    `--attestation-config=${RUN_DIR}/attestationConfig.json`,
    `--qemu-ak-registry=${RUN_DIR}/ak-registry.json`,
    `--measurement-salt-file=${RUN_DIR}/measurementSalt`,
    `--key-service-endpoint=${KEY_SERVICE_LISTEN}`,
    `--kubeconfig=${RUN_DIR}/kubeconfig`,
    `--api-server-endpoint=${ip}:${SIMULATED_API_PORT}`,
    `--metadata-url=${config.metadataUrl}`,
    `--listen=0.0.0.0:${JOIN_SERVICE_PORT}`,
    '--http-listen=127.0.0.1:9080',
    // TCG guests are ~100 times slower than hardware: a worker's quote takes seconds.
    '--attestation-timeout=120000',
    '--client-hello-timeout=60000',
    '--tls-handshake-timeout=60000',
    '--verdict-timeout=60000',
  ]);
  let last = '';
  const watch = setInterval(() => {
    const now = JSON.stringify({
      violations: api.violations,
      joiningNodes: [...api.joiningNodes.keys()],
      diskBindings: [...api.diskBindings.values()].map((d) => d.spec),
      tokens: [...api.secrets.keys()].filter((n) => n.startsWith('bootstrap-token-')).length,
    });
    if (now !== last) report({ type: 'api-server', ...JSON.parse(now) });
    last = now;
  }, 2000);
  const [k, j] = await Promise.race([
    Promise.all([key.exit, join.exit]),
    Promise.race([key.exit, join.exit]).then((c) => [c, c]),
  ]);
  clearInterval(watch);
  throw new Error(`a control-plane service exited (key service ${k}, join service ${j})`);
}

async function bootstrap(config: BootstrapConfig): Promise<void> {
  if (config.evidenceNonce !== undefined) await attest({ step: 'attest', nonce: config.evidenceNonce });
  const ip = readFileSync('/run/ip', 'utf8').trim();
  let api: FakeKubeApi | undefined;
  if (config.role === 'control-plane') {
    api = await new FakeKubeApi().start('0.0.0.0', SIMULATED_API_PORT);
    api.seedComponents('k8s-components-1', []);
    await mkdir(RUN_DIR, { recursive: true, mode: 0o700 });
    await writeFile(`${RUN_DIR}/kubeconfig`, api.kubeconfig(), { mode: 0o600 });
    report({ type: 'api-server', simulated: true, listen: `0.0.0.0:${SIMULATED_API_PORT}` });
  }
  await reportPcr15('before');
  const boot = program('bootstrapper', [
    'bootstrapper',
    '--csp=qemu',
    '--attestation-variant=qemu-vtpm',
    `--tcti=${DEVICE_TCTI}`,
    `--disk=${config.stateDisk}`,
    `--metadata-url=${config.metadataUrl}`,
    '--kubeadm=/usr/bin/kubeadm',
  ]);
  let running = true;
  const heartbeat = (async () => {
    while (running) {
      await sleep((config.pcr15EverySeconds ?? 10) * 1000);
      if (running) await reportPcr15('running');
    }
  })();
  const code = await boot.exit;
  running = false;
  await heartbeat;
  report({ type: 'bootstrapper-exit', code });
  await reportDiskState(config.stateDisk);
  await reportPcr15('after');
  if (code !== 0) throw new Error(`confboot bootstrapper exited with ${code}`);
  if (api !== undefined) await runServices(config, api, ip);
}

async function main(): Promise<void> {
  const started = Date.now();
  const config = JSON.parse(readFileSync(GUEST_CONFIG_PATH, 'utf8')) as GuestConfig;
  report({ type: 'started', step: config.step });
  if (config.stateDisk !== undefined) {
    report({ type: 'disk', ...(await mapStateDisk(config.stateDisk)) });
  }
  if (config.metadataUrl !== undefined) {
    const res = await fetch(new URL('/self', config.metadataUrl), { signal: AbortSignal.timeout(60_000) });
    report({ type: 'metadata', status: res.status, self: await res.json() });
  }
  if (config.step === 'attest') await attest(config);
  else if (config.step === 'bootstrap') await bootstrap(config);
  else throw new Error(`unknown step ${String((config as { step: unknown }).step)}`);
  report({ type: 'done', ms: Date.now() - started });
}

main().catch((err: unknown) => {
  try {
    report({ type: 'error', message: messageOf(err) });
  } catch {}
  console.error('confboot-mini agent:', err);
  process.exitCode = 1;
});
