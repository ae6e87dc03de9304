/**
 * Entry point bundled by mini and run inside its network namespace (`ip netns exec`), the
 * operator's side of the bridge: `confboot init`'s code path (initCluster) against the
 * control-plane VM's init server. It verifies the VM's real qemu-vtpm quote with the expected
 * measurements and the AK the host registered for that VM before anything secret is sent, then,
 * like the operator's CLI does after init, creates the master-secret Secret through the (SIMULATED)
 * Kubernetes API server on the control plane. Reads its input as JSON on stdin (it holds the
 * secrets), prints the outcome as JSON on stdout (no secrets). Importing this module runs it.
 */
import { MASTER_SECRET_NAME } from '../../../adapters/simulated/simulated-kube-api.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../../domain/measurements.js';
import { createValidator } from '../../attestation/validators.js';
import { initCluster } from '../../cli/init.js';
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
  /** The simulated API server's URL and bearer token. */
  apiServer: { url: string; token: string };
  timeoutMs: number;
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
    const res = await fetch(`${input.apiServer.url}/api/v1/namespaces/kube-system/secrets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${input.apiServer.token}` },
      body: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: { name: MASTER_SECRET_NAME, namespace: 'kube-system' },
        data: { mastersecret: input.masterSecret, salt: input.masterSalt },
      }),
      signal: AbortSignal.timeout(60_000),
    });
    process.stdout.write(
      `${JSON.stringify({
        ok: true,
        attempts,
        clusterId: Buffer.from(outcome.clusterId).toString('hex'),
        attestationChecks: outcome.attestationChecks,
        kubeconfigBytes: outcome.kubeconfig.length,
        masterSecretSecret: res.status,
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
