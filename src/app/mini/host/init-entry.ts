/**
 * Entry point bundled by mini and run inside its network namespace (`ip netns exec`), the
 * operator's side of the bridge: `confboot init`'s code path (initCluster) against the
 * control-plane VM's init server. It verifies the VM's real qemu-vtpm quote with the expected
 * measurements and the AK the host registered for that VM before anything secret is sent, then,
 * like the operator's CLI does after init, creates the master-secret Secret through the (SIMULATED)
 * Kubernetes API server on the control plane, reached with the admin kubeconfig init returned (its
 * address, cluster CA and admin token): over HTTPS verified against that CA, and checked to be this
 * operator's (adapters/kubernetes/master-secret-upload.ts). Reads its input as JSON on stdin (it holds the secrets),
 * prints the outcome as JSON on stdout (no secrets). Importing this module runs it.
 */

import { writeFile } from 'node:fs/promises';
import {
  apiAccessFromKubeconfig,
  MasterSecretUploadError,
  uploadMasterSecret,
} from '../../../adapters/kubernetes/master-secret-upload.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../../domain/measurements.js';
import { initCluster } from '../../operator/init-cluster.js';
import { checkMeasurementPolicy } from '../../registry/policy-guard.js';
import { createValidator } from '../../registry/validators.js';
import { registeredAkOf } from '../provision.js';

/** What mini passes on stdin. */
export interface InitEntryInput {
  endpoint: string;
  attestationConfig: unknown;
  /** Name and base64 AK public area of the control-plane VM. */
  node: { name: string; attestationKeyPublic: string };
  masterSecret: string;
  masterSalt: string;
  measurementSalt: string;
  initSecret: string;
  timeoutMs: number;
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

async function main(): Promise<void> {
  const input = JSON.parse(await readStdin()) as InitEntryInput;
  // The same fail-closed rules as `confboot init`: the master secret goes only to a proven image.
  checkMeasurementPolicy('qemu-vtpm', JSON.stringify(input.attestationConfig), false);
  const config = parseAttestationConfig(input.attestationConfig);
  const validator = createValidator('qemu-vtpm', {
    policy: new MeasurementsPolicy(config.measurements),
    qemuAkTrust: registeredAkOf(input.node.name, b64(input.node.attestationKeyPublic)),
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
    let masterSecretStored: true | { check: string; error: string };
    try {
      await uploadMasterSecret(
        apiAccessFromKubeconfig(outcome.kubeconfig),
        { masterSecret: b64(input.masterSecret), salt: b64(input.masterSalt) },
        { deadline },
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
