/**
 * The operator's side of the init flow (app layer), shared by `confboot init`, the demo and mini:
 * verifies the first node's attestation over attested TLS before sending anything, then sends the
 * InitRequest — master secret and salt inside `kms_uri` as upstream, a fresh measurement salt, the
 * init secret and the cluster name — and returns the admin kubeconfig and the cluster ID, or why the
 * init was refused or failed with the log lines the node streamed back.
 */
import { GrpcInitClient } from '../../adapters/grpc/init-client.js';
import { clusterKmsUri, NO_STORE_URI } from '../../adapters/grpc/kms-uri.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { isAttestationError, messageOf } from '../../ports/errors.js';
import { formatMismatch } from '../../ports/measurement-policy.js';
import type { Component } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';

/** What {@link initCluster} needs; the CLI builds it from flags, the demo passes it directly. */
export interface InitClusterOptions {
  endpoint: string;
  validators: Validator[];
  masterSecret: Uint8Array;
  masterSalt: Uint8Array;
  measurementSalt: Uint8Array;
  initSecret: Uint8Array;
  clusterName: string;
  kubernetesVersion: string;
  apiserverCertSans: string[];
  serviceCidr: string;
  /** Components the node installs, hash-checked, before `kubeadm init`; default none. */
  components?: Component[];
  timeoutInMs: number;
  /** Bound of the attested TLS handshake (the client's default when unset); slow VMs need more. */
  handshakeTimeoutMs?: number;
  /** Progress lines (never secrets). */
  progress: (line: string) => void;
}

/** The outcome of an init, for printing or for the demo. */
export type InitClusterOutcome =
  | { ok: true; kubeconfig: Uint8Array; clusterId: Uint8Array; attestationChecks: string[] }
  | { ok: false; error: string; logs: string; check?: string; mismatches?: string[] };

/** Verifies the node's attestation and runs Init; never throws for a refused or failed init. */
export async function initCluster(o: InitClusterOptions): Promise<InitClusterOutcome> {
  const client = new GrpcInitClient({
    validators: o.validators,
    clock: new SystemClock(),
    ...(o.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: o.handshakeTimeoutMs }),
  });
  o.progress(`Connecting to ${o.endpoint} and verifying the node's attestation`);
  try {
    const outcome = await client.init(
      o.endpoint,
      {
        kmsUri: clusterKmsUri(o.masterSecret, o.masterSalt),
        storageUri: NO_STORE_URI,
        measurementSalt: o.measurementSalt,
        kubernetesVersion: o.kubernetesVersion,
        conformanceMode: false,
        kubernetesComponents: o.components ?? [],
        initSecret: o.initSecret,
        clusterName: o.clusterName,
        apiserverCertSans: o.apiserverCertSans,
        serviceCidr: o.serviceCidr,
      },
      { timeoutInMs: o.timeoutInMs },
    );
    const checks =
      outcome.server?.attestation?.checks.map((c) => `${c.ok ? 'ok' : 'FAILED'} ${c.name}`) ?? [];
    if (outcome.kind === 'success') {
      o.progress('Node attested; cluster initialised');
      return {
        ok: true,
        kubeconfig: outcome.result.kubeconfig,
        clusterId: outcome.result.clusterId,
        attestationChecks: checks,
      };
    }
    return { ok: false, error: outcome.error, logs: new TextDecoder().decode(outcome.logs) };
  } catch (err) {
    if (isAttestationError(err)) {
      return {
        ok: false,
        error: err.message,
        logs: '',
        check: err.check,
        mismatches: err.mismatches.map(formatMismatch),
      };
    }
    return { ok: false, error: messageOf(err), logs: '' };
  }
}
