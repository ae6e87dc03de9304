/**
 * Entry point bundled by mini and run inside its network namespace (`ip netns exec`), the
 * operator's side of the bridge: `confboot init`'s code path (initCluster) against the
 * control-plane VM's init server. It verifies the VM's real qemu-vtpm quote with the expected
 * measurements and, by the rule of `confboot init --qemu-ak-registry` and the join service, the AK
 * the host registered for the VM's address in the identities file before anything secret is sent, then,
 * like the operator's CLI does after init, creates the master-secret Secret through the (SIMULATED)
 * Kubernetes API server on the control plane, reached with the admin kubeconfig init returned (its
 * address, cluster CA and admin token): over HTTPS verified against that CA, and checked to be this
 * operator's (adapters/kubernetes/master-secret-upload.ts). Reads its input as JSON on stdin (it holds the secrets),
 * prints the outcome as JSON on stdout (no secrets). Importing this module runs it.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  apiAccessFromKubeconfig,
  MasterSecretUploadError,
  uploadMasterSecret,
} from '../../../adapters/kubernetes/master-secret-upload.js';
import { MASTER_SECRET_NAME } from '../../../adapters/kubernetes/names.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { bringUp } from '../../../app/bringup/bring-up.js';
import { DEFAULT_IMAGE } from '../../../app/manifests/common.js';
import { initCluster } from '../../../app/operator/init-cluster.js';
import { checkMeasurementPolicy } from '../../../app/registry/policy-guard.js';
import { qemuAkLookups } from '../../../app/registry/validator-deps.js';
import { buildValidator } from '../../../app/registry/validators.js';
import type { Component } from '../../../ports/types.js';

/** What mini passes on stdin. */
export interface InitEntryInput {
  endpoint: string;
  attestationConfig: unknown;
  /**
   * The registered attestation keys (the metadata server's identities file, `--qemu-ak-registry`):
   * the control plane is trusted only with the AK registered for the address init connects to.
   */
  akRegistryPath: string;
  masterSecret: string;
  masterSalt: string;
  measurementSalt: string;
  initSecret: string;
  timeoutMs: number;
  /**
   * Bring the cluster up after init, as `confboot init` does: the components go to the node in the
   * init request, then `confboot apply`'s bring-up runs through the kubeconfig init returned (its
   * server: the load balancer, where the host serves the simulated API server). Without it the
   * master-secret Secret alone is created (one control plane).
   */
  bringUp?: { components: Component[] };
  /** Where to keep the admin kubeconfig init returned (mode 0600), for later operator steps. */
  kubeconfigPath?: string;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `confboot apply`'s bring-up through the kubeconfig init returned, once its API server answers
 * (bounded by `deadline`); the outcome names every object and whether this run created the
 * master-secret Secret (not found existing).
 */
async function bringUpAfterInit(
  input: InitEntryInput,
  outcome: { kubeconfig: Uint8Array; clusterId: Uint8Array; attestationChecks: string[] },
  attempts: number,
  deadline: number,
  progress: (line: string) => void,
): Promise<Record<string, unknown>> {
  const base = {
    attempts,
    clusterId: Buffer.from(outcome.clusterId).toString('hex'),
    attestationChecks: outcome.attestationChecks,
    kubeconfigBytes: outcome.kubeconfig.length,
  };
  const dir = await mkdtemp(join(tmpdir(), 'confboot-mini-init-'));
  try {
    const kubeconfig = join(dir, 'admin.conf');
    await writeFile(kubeconfig, outcome.kubeconfig, { mode: 0o600 });
    const apply = () =>
      bringUp({
        cloud: 'qemu',
        variant: 'qemu-vtpm',
        kubeconfig,
        image: DEFAULT_IMAGE,
        masterSecret: b64(input.masterSecret),
        masterSalt: b64(input.masterSalt),
        measurementSalt: b64(input.measurementSalt),
        attestationConfig: JSON.stringify(input.attestationConfig),
        components: input.bringUp?.components ?? [],
        kubernetesVersion: 'v1.31.1',
        readyTimeoutInMs: Math.max(1000, deadline - Date.now()),
        progress: (line) => progress(`apply: ${line}`),
      });
    // The host starts the API server once the control plane's kubeadm init made its credentials;
    // the bring-up is idempotent, so it is tried again while the server does not answer yet.
    let applied: Awaited<ReturnType<typeof apply>>;
    for (;;) {
      try {
        applied = await apply();
        break;
      } catch (err) {
        const notYet = /ECONNREFUSED|EHOSTUNREACH|ECONNRESET|socket hang up/i.test(
          String((err as Error).message),
        );
        if (!notYet || Date.now() + 5000 > deadline) throw err;
        await sleep(2000);
      }
    }
    const master = applied.find((a) => a.kind === 'Secret' && a.name === MASTER_SECRET_NAME);
    const masterSecretStored = master?.action === 'created';
    return {
      ok: masterSecretStored,
      ...base,
      masterSecretStored,
      applied,
      ...(masterSecretStored
        ? {}
        : { error: `master-secret Secret ${master?.action ?? 'missing'}, not created by this run` }),
    };
  } catch (err) {
    return { ok: false, ...base, error: `bring-up: ${(err as Error).message}` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const input = JSON.parse(await readStdin()) as InitEntryInput;
  // The same fail-closed rules as `confboot init`: the master secret goes only to a proven image.
  const config = JSON.stringify(input.attestationConfig);
  checkMeasurementPolicy('qemu-vtpm', config, false);
  const validator = buildValidator('qemu-vtpm', Buffer.from(config), {
    clock: new SystemClock(),
    ...(await qemuAkLookups({ qemuAkRegistryPath: input.akRegistryPath })),
  });
  const deadline = Date.now() + input.timeoutMs;
  const progress = (line: string) => process.stderr.write(`init: ${line}\n`);
  let attempts = 0;
  for (;;) {
    attempts++;
    const outcome = await initCluster({
      endpoint: input.endpoint,
      validators: [validator],
      masterSecret: b64(input.masterSecret),
      masterSalt: b64(input.masterSalt),
      measurementSalt: b64(input.measurementSalt),
      initSecret: b64(input.initSecret),
      clusterName: 'confboot-mini',
      kubernetesVersion: 'v1.31.1',
      apiserverCertSans: [],
      serviceCidr: '10.96.0.0/12',
      timeoutInMs: Math.max(1000, deadline - Date.now()),
      // A TCG guest on a loaded host quotes slowly: seconds to minutes per handshake.
      handshakeTimeoutMs: 120_000,
      progress,
      ...(input.bringUp ? { components: input.bringUp.components } : {}),
    });
    if (!outcome.ok) {
      // The init server may not listen yet (the VM is still starting the bootstrapper).
      const notYet =
        outcome.check === undefined &&
        outcome.logs === '' &&
        /unavailable|ECONNREFUSED|No connection|connect|UNAVAILABLE|EHOSTUNREACH/i.test(outcome.error);
      if (notYet && Date.now() + 5000 < deadline) {
        await sleep(3000);
        continue;
      }
      process.stdout.write(`${JSON.stringify({ ...outcome, attempts })}\n`);
      return;
    }
    if (input.kubeconfigPath !== undefined)
      await writeFile(input.kubeconfigPath, outcome.kubeconfig, { mode: 0o600 });
    if (input.bringUp !== undefined) {
      process.stdout.write(
        `${JSON.stringify(await bringUpAfterInit(input, outcome, attempts, deadline, progress))}\n`,
      );
      return;
    }
    let masterSecretStored: true | { check: string; error: string };
    try {
      await uploadMasterSecret(
        apiAccessFromKubeconfig(outcome.kubeconfig),
        { masterSecret: b64(input.masterSecret), salt: b64(input.masterSalt) },
        { deadline, onWait: progress },
      );
      masterSecretStored = true;
    } catch (err) {
      masterSecretStored = {
        check: err instanceof MasterSecretUploadError ? err.check : 'internal',
        error: (err as Error).message,
      };
    }
    process.stdout.write(
      `${JSON.stringify({
        ok: masterSecretStored === true,
        attempts,
        clusterId: Buffer.from(outcome.clusterId).toString('hex'),
        attestationChecks: outcome.attestationChecks,
        kubeconfigBytes: outcome.kubeconfig.length,
        masterSecretStored: masterSecretStored === true,
        ...(masterSecretStored === true
          ? {}
          : { error: `master-secret Secret (${masterSecretStored.check}): ${masterSecretStored.error}` }),
      })}\n`,
    );
    return;
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stdout.write(`${JSON.stringify({ ok: false, error: (err as Error).message })}\n`);
    process.exit(1);
  },
);
