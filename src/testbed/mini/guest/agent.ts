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
 * /usr/bin/kubeadm; the kubelet restart of a rebooted node and the reboot after a failure past the
 * node lock through commands the agent writes, boot-commands.ts) and forwards its log lines; reports PCR 15 while it runs and, once it exits,
 * the state disk as the node sees it (mapping, keyslots, whether the initial passphrase still
 * opens it) and PCR 15. On a control plane, once the simulated `kubeadm init` has written the API
 * server's serving certificate (signed by the cluster CA) and the random admin token in admin.conf,
 * the agent starts the SIMULATED Kubernetes API server on :6443 (HTTPS, that token); after init it
 * plays the kubelet: once the operator has created the master-secret Secret it writes it to files
 * in /run and starts the production `confboot key-service` and `confboot join-service` (the join
 * service on :30090, where workers find it, with admin.conf as its kubeconfig), forwarding their
 * log lines, until the host powers the VM off. A control plane of a cluster with several control
 * planes (config `loadBalancer`) runs no API server: the host serves it at the load balancer, and
 * the control plane starts its services from what it reads through that API (ha-kubelet.ts).
 *
 * With `verifyListen` the bootstrapper also serves the verification service (`--verify-listen`)
 * and keeps running once the node is bootstrapped: its outcome line counts as its exit (reported as
 * `bootstrapper-exit` with `serving: true`), and a control plane's node operator re-attests the
 * joined nodes (node-orders.ts). With `orders` the agent then takes the host's orders (node-orders.ts).
 *
 * Step `attest`: one qemu-vtpm attestation document through the kernel's resource manager (TCTI
 * `device:/dev/tpmrm0`), carrying the firmware event log from securityfs, bound to the host's nonce.
 *
 * Quotes for the host: only the one evidence document per boot, for the nonce in the pre-boot
 * config, with fixed user data, and only before the bootstrapper starts (evidence.ts).
 *
 * The control plane's parts (the simulated API server with its controllers, ha-kubelet.ts) are
 * imported when a control plane starts its bootstrapper: they carry the Kubernetes client (with undici, about
 * 1.3 MB of the 2.2 MB bundle), and a worker's boot under TCG would parse them for nothing. mini
 * bundles the agent with code splitting (image.ts), so those chunks load only on a control plane.
 *
 * Over 400 lines because it is the guest's one entry point (bundled into one file for the
 * initramfs): its order handling follows the boot in sequence; the protocol, the boot commands,
 * the node orders and the control-plane API live in their own modules.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createQemuVtpmIssuer, LINUX_EVENT_LOG_PATH } from '../../../adapters/attestation/vtpm/issuer.js';
import { DEFAULT_INITIAL_PASSPHRASE_PATH } from '../../../adapters/disk/cryptsetup-disk.js';
import { runCryptsetup } from '../../../adapters/disk/cryptsetup-runner.js';
import { DEVICE_TCTI, Tpm2ToolsTpm } from '../../../adapters/tpm/tpm2-tools-tpm.js';
import { ADMIN_CONF_PATH, JOIN_SERVICE_PORT, PKI_DIR } from '../../../app/defaults.js';
import { messageOf } from '../../../ports/errors.js';
import { loadApiServerCredentials } from '../../simulated/apiserver-credentials.js';
import { type FakeKubeApi, MASTER_SECRET_NAME } from '../../simulated/simulated-kube-api.js';
import { writeBootCommands } from './boot-commands.js';
import { isLuks, mappingModes, mapStateDisk, stateDisk } from './disk-mapper.js';
import { EvidenceGate } from './evidence.js';
import { syncJoinConfig, writeReceiptKey } from './kubelet-sync.js';
import { keepClusterId, reattestationArgs, serveOrders } from './node-orders.js';
import {
  API_SERVER_PUBLIC_KEY_PATH,
  type BootstrapConfig,
  GUEST_CONFIG_PATH,
  parseGuestConfig,
  REPORT_PORT,
  REPORT_PREFIX,
  SIMULATED_API_PORT,
  VERIFY_PORT,
} from './protocol.js';
import {
  bindKubernetes,
  makeStateFilesystem,
  readMarker,
  restoreApiServer,
  STATE_MOUNT,
  saveApiServer,
  writeMarker,
} from './state.js';

const CLI = '/opt/confboot/cli/main.js';
const RUN_DIR = '/run/confboot';
const NODE_STATE = '/run/state/constellation/node_state.json';
const KEY_SERVICE_LISTEN = '127.0.0.1:9000';

function report(value: Record<string, unknown>): void {
  appendFileSync(REPORT_PORT, `${REPORT_PREFIX}${JSON.stringify(value)}\n`);
}

/** The one evidence document of this boot, for the committed nonce (the gate refuses anything else). */
async function attest(gate: EvidenceGate, nonceHex: string): Promise<void> {
  const tpm = new Tpm2ToolsTpm({ tcti: DEVICE_TCTI, timeoutInMs: 120_000 });
  const issuer = createQemuVtpmIssuer(tpm, { eventLogPath: LINUX_EVENT_LOG_PATH });
  const document = await gate.issue(issuer, Buffer.from(nonceHex, 'hex'));
  report({ type: 'attestation', tcti: tpm.tcti, document: Buffer.from(document).toString('base64') });
}

/**
 * Starts `node CLI args…`, forwarding every output line as a `log` report (and to `onLine`);
 * resolves to the exit code.
 */
function program(
  source: string,
  args: string[],
  onLine?: (line: string) => void,
): { exit: Promise<number | null> } {
  const child = spawn('/usr/bin/node', [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr])
    createInterface({ input: stream }).on('line', (line) => {
      report({ type: 'log', source, line });
      onLine?.(line);
    });
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
    report({
      type: 'pcr15',
      when,
      value: value ? Buffer.from(value).toString('hex') : null,
      mapped: existsSync('/dev/mapper/state'),
    });
  } catch (err) {
    report({ type: 'pcr15', when, error: (err as Error).message });
  }
}

/**
 * The state disk as the node sees it after the bootstrapper: the mapping (dm status), and through
 * the production adapter's validated header copy the keyslots and whether the initial passphrase
 * still opens it.
 */
async function reportDiskState(device: string): Promise<void> {
  // `cryptsetup status` exits non-zero when the mapping does not exist.
  const status =
    (await runCryptsetup(['status', 'state'], { timeoutInMs: 60_000 }).catch(() => undefined))?.stdout ??
    'inactive';
  const disk = stateDisk(device);
  const release = await disk.open();
  let keyslots: number[];
  let headerIntegrity: string | null;
  let initialOpens = false;
  let uuid: string;
  try {
    const header = await disk.validateHeader();
    keyslots = header.keyslots;
    headerIntegrity = header.integrity;
    uuid = await disk.uuid();
    // After a reboot no initial passphrase exists any more (it lived in /run, a tmpfs).
    if (existsSync(DEFAULT_INITIAL_PASSPHRASE_PATH))
      initialOpens = await disk.testPassphrase(await readFile(DEFAULT_INITIAL_PASSPHRASE_PATH));
  } finally {
    await release();
  }
  report({
    type: 'disk-state',
    uuid,
    active: /is active/.test(status),
    ...(/is active/.test(status) ? mappingModes(status) : { cipher: null, integrity: null }),
    keyslots,
    // From the validated header: also known when the disk is not mapped (a fresh join after a reset).
    headerIntegrity: headerIntegrity ?? 'none',
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
  await writeReceiptKey(`${RUN_DIR}/receipt-key.pem`);
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
    `--kubeconfig=${ADMIN_CONF_PATH}`,
    `--api-server-endpoint=${ip}:${SIMULATED_API_PORT}`,
    `--metadata-url=${config.metadataUrl}`,
    `--listen=0.0.0.0:${JOIN_SERVICE_PORT}`,
    // On the bridge: the operator fetches the receipts' JWKS from /.well-known/jwks.json.
    '--http-listen=0.0.0.0:9080',
    `--receipt-key=${RUN_DIR}/receipt-key.pem`,
    // Evidence as EvidenceRecords in the SIMULATED API server: the operator's dry run reads them.
    '--evidence-store=cluster',
    // TCG guests are ~100 times slower than hardware: a worker's quote takes seconds.
    '--attestation-timeout=120000',
    '--client-hello-timeout=60000',
    '--tls-handshake-timeout=60000',
    '--verdict-timeout=60000',
  ]);
  const stopSync = syncJoinConfig(api, `${RUN_DIR}/attestationConfig.json`, (sha256) =>
    report({ type: 'join-config-synced', sha256 }),
  );
  let last = '';
  let saved = await saveApiServer(api, '');
  let saving = false;
  const watch = setInterval(() => {
    // The API server's objects stand for etcd: kept on the state disk, restored after a reboot;
    // one save at a time (under TCG a synced write can take longer than the interval).
    if (!saving) {
      saving = true;
      void saveApiServer(api, saved)
        .then(
          (v) => {
            saved = v;
          },
          (err: unknown) =>
            report({ type: 'log', source: 'agent', line: `saving the API server: ${messageOf(err)}` }),
        )
        .finally(() => {
          saving = false;
        });
    }
    const now = JSON.stringify({
      violations: api.violations,
      joiningNodes: [...api.joiningNodes.keys()],
      diskBindings: [...api.diskBindings.values()].map((d) => d.spec),
      tokens: [...api.secrets.keys()].filter((n) => n.startsWith('bootstrap-token-')).length,
      events: [...api.events.values()].map((e) => ({ reason: e.reason, count: e.count, message: e.message })),
      evidenceRecords: api.evidenceRecords.size,
    });
    if (now !== last) report({ type: 'api-server', ...JSON.parse(now) });
    last = now;
  }, 2000);
  const [k, j] = await Promise.race([
    Promise.all([key.exit, join.exit]),
    Promise.race([key.exit, join.exit]).then((c) => [c, c]),
  ]);
  clearInterval(watch);
  stopSync();
  throw new Error(`a control-plane service exited (key service ${k}, join service ${j})`);
}

/**
 * Starts the SIMULATED API server (HTTPS on :6443) once the simulated `kubeadm init` has written
 * its credentials; undefined when `done()` turns true (the bootstrapper exited) before they appear.
 */
async function startApiServer(done: () => boolean, reattest: boolean): Promise<FakeKubeApi | undefined> {
  // Loaded while the bootstrapper starts, long before `kubeadm init` writes the credentials: the
  // bootstrapper calls the API server right after kubeadm init returns.
  const controlPlaneApi = import('./control-plane-api.js');
  controlPlaneApi.catch(() => {});
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    const finished = done();
    // A control plane bootstrapped before finds them on its state disk once the disk mapper mounted it.
    await bindKubernetes();
    const credentials = await loadApiServerCredentials(PKI_DIR, ADMIN_CONF_PATH);
    if (credentials !== undefined) {
      // With the controller-manager's signer and the node operator beside it (control-plane-api.ts).
      const ip = readFileSync('/run/ip', 'utf8').trim();
      const { startControlPlaneApi } = await controlPlaneApi;
      const { api, restored } = await startControlPlaneApi({
        credentials,
        ip,
        port: SIMULATED_API_PORT,
        restore: restoreApiServer,
        report,
        program,
        ...(reattest ? { operatorArgs: () => reattestationArgs(RUN_DIR) } : {}),
      });
      report({
        type: 'api-server',
        simulated: true,
        listen: `0.0.0.0:${SIMULATED_API_PORT}`,
        tls: true,
        restoredFromStateDisk: restored,
      });
      return api;
    }
    if (finished) return undefined;
    if (Date.now() > deadline)
      throw new Error('the simulated kubeadm init wrote no API server credentials in 15 minutes');
    await sleep(250);
  }
}

async function bootstrap(config: BootstrapConfig, gate: EvidenceGate | undefined): Promise<void> {
  if (gate !== undefined && config.evidenceNonce !== undefined) await attest(gate, config.evidenceNonce);
  // No quote for the host once the bootstrapper runs.
  gate?.close();
  const ip = readFileSync('/run/ip', 'utf8').trim();
  await reportPcr15('before');
  if (config.apiServerPublicKey !== undefined)
    await writeFile(API_SERVER_PUBLIC_KEY_PATH, config.apiServerPublicKey, { mode: 0o644 });
  const commands = await writeBootCommands(RUN_DIR);
  // With the verification service the bootstrapper keeps running once the node is bootstrapped:
  // its outcome line is its end here (it exits on every other path).
  let outcome: (code: number) => void = () => {};
  const bootstrapped = new Promise<number>((resolve) => {
    outcome = resolve;
  });
  const onLine = (line: string) => {
    if (!/^Node (joined|rejoined|initialised|is already|was recovered)/.test(line)) return;
    void keepClusterId(line).catch((err: unknown) =>
      report({ type: 'log', source: 'agent', line: `keeping the cluster ID: ${messageOf(err)}` }),
    );
    if (config.verifyListen === true) outcome(0);
  };
  const boot = program(
    'bootstrapper',
    [
      'bootstrapper',
      '--csp=qemu',
      '--attestation-variant=qemu-vtpm',
      `--tcti=${DEVICE_TCTI}`,
      `--disk=${config.stateDisk}`,
      `--metadata-url=${config.metadataUrl}`,
      `--kubeadm=${config.failKubeadm === true ? '/bin/false' : '/usr/bin/kubeadm'}`,
      `--kubelet-restart-command=${commands.kubeletRestart}`,
      `--reboot-command=${commands.reboot}`,
      // A disk set up before: the production disk mapper opens it (rejoin, or recovery on a control
      // plane) and mounts it where upstream does; a disk it wipes is formatted with cheap PBKDF2.
      `--state-mount=${STATE_MOUNT}`,
      '--format-pbkdf2-iterations=1000',
      ...(config.verifyListen === true ? [`--verify-listen=0.0.0.0:${VERIFY_PORT}`] : []),
    ],
    onLine,
  );
  let running = true;
  // Several control planes: the API server runs on the host at the load balancer (ha-kubelet.ts).
  const lb = config.role === 'control-plane' ? config.loadBalancer : undefined;
  const apiStarting =
    config.role === 'control-plane' && lb === undefined
      ? startApiServer(() => !running, config.verifyListen === true)
      : undefined;
  apiStarting?.catch(() => {});
  const credentialsReported = config.apiServerPublicKey
    ? import('./ha-kubelet.js').then((m) => m.reportApiCredentials(() => !running, report))
    : undefined;
  credentialsReported?.catch(() => {});
  const heartbeat = (async () => {
    while (running) {
      await sleep((config.pcr15EverySeconds ?? 10) * 1000);
      if (running) await reportPcr15('running');
    }
  })();
  const code = await Promise.race([boot.exit, bootstrapped]);
  running = false;
  await heartbeat;
  // `serving`: bootstrapped, and still running its verification service.
  report({
    type: 'bootstrapper-exit',
    code,
    ...(config.verifyListen === true && code === 0 ? { serving: true } : {}),
  });
  await reportDiskState(config.stateDisk);
  await reportPcr15('after');
  if (code !== 0) throw new Error(`confboot bootstrapper exited with ${code}`);
  await bindKubernetes();
  if (config.marker !== undefined) {
    await writeMarker(config.marker);
    report({ type: 'marker-written' });
  }
  report({ type: 'marker', ...readMarker() });
  if (config.orders === true) await serveOrders(new URL(config.metadataUrl).hostname, report);
  if (credentialsReported !== undefined && !(await credentialsReported))
    throw new Error('the simulated kubeadm init issued no API server certificate for the host');
  if (lb !== undefined)
    await (await import('./ha-kubelet.js')).runServicesFromApi(config, lb, report, program);
  if (apiStarting !== undefined) {
    const api = await apiStarting;
    if (api === undefined) throw new Error('the simulated kubeadm init wrote no API server credentials');
    await runServices(config, api, ip);
  }
  if (config.stay) {
    report({ type: 'staying' });
    // Until the host powers the VM off; the interval keeps the agent alive.
    setInterval(() => void reportPcr15('staying'), 60_000);
    await new Promise(() => {});
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const config = parseGuestConfig(readFileSync(GUEST_CONFIG_PATH, 'utf8'));
  report({ type: 'started', step: config.step });
  const committed = config.step === 'attest' ? config.nonce : config.evidenceNonce;
  const gate = committed === undefined ? undefined : new EvidenceGate(committed);
  if (config.stateDisk !== undefined) {
    if ((await isLuks(config.stateDisk, {})) && !existsSync(DEFAULT_INITIAL_PASSPHRASE_PATH)) {
      // Set up on an earlier boot: the production disk mapper in the bootstrapper opens it.
      report({ type: 'disk-set-up-before' });
    } else {
      const disk = await mapStateDisk(config.stateDisk);
      if (disk.formatted) {
        await makeStateFilesystem(disk.mapping);
        await bindKubernetes();
      }
      report({ type: 'disk', ...disk, mounted: disk.formatted ? STATE_MOUNT : null });
    }
  }
  if (config.metadataUrl !== undefined) {
    const res = await fetch(new URL('/self', config.metadataUrl), { signal: AbortSignal.timeout(60_000) });
    report({ type: 'metadata', status: res.status, self: await res.json() });
  }
  if (config.step === 'attest') {
    await attest(gate as EvidenceGate, config.nonce);
    gate?.close();
  } else await bootstrap(config, gate);
  report({ type: 'done', ms: Date.now() - started });
}

main().catch((err: unknown) => {
  try {
    report({ type: 'error', message: messageOf(err) });
  } catch {}
  console.error('confboot-mini agent:', err);
  process.exitCode = 1;
});
