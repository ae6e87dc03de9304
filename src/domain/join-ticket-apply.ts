/**
 * What a joining node does with its join ticket once the node lock is taken (upstream JoinClient's
 * `startNodeAndJoin`): set the state disk passphrase to the ticket's key, write the control-plane
 * files, the kubelet credentials, the emergency SSH files, the node state and the receipt, and run
 * kubeadm join. The lock made this the point of no return, so every failure is final
 * (`unrecoverable`): the caller marks the state disk for reset and reboots. The join flow
 * (join-flow.ts) gets the ticket and takes the lock.
 */
import type { Clock } from '../ports/clock.js';
import type { ClusterJoiner, JoinClusterArgs } from '../ports/cluster-joiner.js';
import type { EncryptedDisk } from '../ports/encrypted-disk.js';
import { ConfbootError, messageOf, wrapError } from '../ports/errors.js';
import type { FileWriter } from '../ports/file-writer.js';
import { CONTROL_PLANE_FILE_NAMES } from '../ports/kubernetes-node.js';
import type { Logger } from '../ports/logger.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { Random } from '../ports/random.js';
import type { InstanceMetadata, JoinTicket } from '../ports/types.js';
import { type BackoffOptions, callWithTimeout, fullJitterDelayMs } from './backoff.js';
import { unrecoverable } from './errors.js';
import { DEFAULT_SSH_PATHS } from './ssh-ca.js';
import { type HostKeyRequest, writeTicketSshFiles } from './ssh-node.js';
import { withStateDisk } from './state-disk.js';

/** How many times kubeadm join is tried after the lock (upstream: 3). */
export const JOIN_CLUSTER_ATTEMPTS = 3;

/** Where the join flow writes the node's credentials. */
export interface JoinPaths {
  /** Directory of the control-plane files (upstream `/etc/kubernetes/pki`). */
  pkiDir: string;
  /** Kubelet client certificate (PEM). */
  kubeletCertPath: string;
  /** Kubelet client key (PEM). */
  kubeletKeyPath: string;
  /** The join service's signed receipt of this join (a JWT), on the state disk. */
  receiptPath: string;
  /** The emergency SSH CA's public key from the ticket (sshd `TrustedUserCAKeys`). */
  sshCaPublicKeyPath: string;
  /** The SSH host certificate from the ticket (sshd `HostCertificate`). */
  sshHostCertificatePath: string;
}

/** Upstream's paths. */
export const DEFAULT_JOIN_PATHS: Readonly<JoinPaths> = Object.freeze({
  pkiDir: '/etc/kubernetes/pki',
  kubeletCertPath: '/run/state/kubelet/pki/kubelet-client-crt.pem',
  kubeletKeyPath: '/run/state/kubelet/pki/kubelet-client-key.pem',
  receiptPath: '/run/state/constellation/join-receipt.jwt',
  sshCaPublicKeyPath: DEFAULT_SSH_PATHS.caPublicKeyPath,
  sshHostCertificatePath: DEFAULT_SSH_PATHS.hostCertificatePath,
});

/** The ports applying a ticket uses (only the slices it needs). */
export interface ApplyJoinTicketDeps {
  disk: Pick<EncryptedDisk, 'open' | 'updatePassphrase'>;
  files: FileWriter;
  nodeState: Pick<NodeStateStore, 'write'>;
  joiner: ClusterJoiner;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
}

/** A ticket to apply, with what the node sent for it. */
export interface TicketToApply {
  ticket: JoinTicket;
  /** PEM key of the CSR the kubelet certificate was issued for. Secret. */
  keyPem: Uint8Array;
  /** The join service that issued it (logged). */
  endpoint: string;
  /** Fields 4 and 5 of the join request (the SSH host key sent, if any). */
  hostKey: HostKeyRequest;
}

/** How a ticket is applied. */
export interface ApplyJoinTicketOptions {
  paths: JoinPaths;
  /** Deadline of each kubeadm join attempt in ms. */
  joinClusterMs: number;
  /** Pause between kubeadm join attempts (full jitter). */
  backoff: BackoffOptions;
  /** Called first (upstream `cleaner.Clean()`); a failure is final like every other. */
  onPointOfNoReturn?: (() => void | Promise<void>) | undefined;
}

/**
 * Applies `got` on node `self`, the node lock already taken. Resolves once the node joined the
 * cluster; rejects `unrecoverable` naming the step that failed. Only a failure to keep the receipt
 * is logged and passed over (it is evidence for others, not something this node needs to run).
 */
export async function applyJoinTicket(
  deps: ApplyJoinTicketDeps,
  self: InstanceMetadata,
  got: TicketToApply,
  options: ApplyJoinTicketOptions,
): Promise<void> {
  const { disk, files, nodeState, logger } = deps;
  const { ticket } = got;
  const { paths } = options;
  const step = async <T>(operation: string, fn: () => Promise<T> | T): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw unrecoverable(`join after node lock: ${operation}`, err);
    }
  };
  await step('running point-of-no-return callback', () => options.onPointOfNoReturn?.());
  await step('updating state disk passphrase', () =>
    withStateDisk(disk, logger, () => disk.updatePassphrase(ticket.stateDiskKey)),
  );
  if (self.role === 'ControlPlane') {
    for (const file of ticket.controlPlaneFiles) {
      await step(`writing control-plane file ${file.name}`, () =>
        files.writeExclusive(pkiPath(paths.pkiDir, file.name), file.data),
      );
    }
  }
  await step('writing kubelet certificate', () =>
    files.writeExclusive(paths.kubeletCertPath, ticket.kubeletCert),
  );
  await step('writing kubelet key', () => files.writeExclusive(paths.kubeletKeyPath, got.keyPem));
  await step('writing emergency SSH CA key and host certificate', () =>
    writeTicketSshFiles(files, got.hostKey, ticket, {
      caPublicKeyPath: paths.sshCaPublicKeyPath,
      hostCertificatePath: paths.sshHostCertificatePath,
    }),
  );
  await step('writing node state', () =>
    nodeState.write({ role: self.role, measurementSalt: ticket.measurementSalt }),
  );
  if (ticket.receipt !== undefined) {
    try {
      await files.writeExclusive(paths.receiptPath, new TextEncoder().encode(`${ticket.receipt}\n`));
    } catch (err) {
      logger.warn('Failed to write the join receipt', { path: paths.receiptPath, error: messageOf(err) });
    }
  }
  await step('joining Kubernetes cluster', () =>
    joinCluster(
      deps,
      {
        apiServerEndpoint: ticket.apiServerEndpoint,
        token: ticket.token,
        discoveryTokenCaCertHash: ticket.discoveryTokenCaCertHash,
        nodeName: self.name,
        nodeIp: self.vpcIp,
        role: self.role,
        kubernetesVersion: ticket.kubernetesVersion,
        components: ticket.kubernetesComponents,
        kubeletCertPath: paths.kubeletCertPath,
        kubeletKeyPath: paths.kubeletKeyPath,
      },
      options,
    ),
  );
  logger.info('Joined the cluster', { role: self.role, endpoint: got.endpoint });
}

/** Where control-plane file `name` goes under `pkiDir`. */
function pkiPath(pkiDir: string, name: string): string {
  // Checked before the lock already; checked again because this string becomes a path.
  if (!CONTROL_PLANE_FILE_NAMES.includes(name)) {
    throw new ConfbootError('invalid-argument', `unexpected control-plane file name ${JSON.stringify(name)}`);
  }
  return `${pkiDir.replace(/\/+$/, '')}/${name}`;
}

/** kubeadm join, tried up to {@link JOIN_CLUSTER_ATTEMPTS} times (it sometimes fails transiently). */
async function joinCluster(
  deps: Pick<ApplyJoinTicketDeps, 'joiner' | 'clock' | 'random' | 'logger'>,
  args: JoinClusterArgs,
  options: Pick<ApplyJoinTicketOptions, 'joinClusterMs' | 'backoff'>,
): Promise<void> {
  const { joiner, clock, logger } = deps;
  let last: unknown;
  for (let attempt = 0; attempt < JOIN_CLUSTER_ATTEMPTS; attempt++) {
    try {
      await callWithTimeout(clock, 'kubeadm join', options.joinClusterMs, undefined, (o) =>
        joiner.joinCluster(args, o),
      );
      return;
    } catch (err) {
      last = err;
      logger.error('Failed to join Kubernetes cluster', {
        role: args.role,
        attempt: attempt + 1,
        error: messageOf(err),
      });
    }
    if (attempt + 1 < JOIN_CLUSTER_ATTEMPTS) {
      await clock.sleep(fullJitterDelayMs(attempt, options.backoff, deps.random));
    }
  }
  throw wrapError(`${JOIN_CLUSTER_ATTEMPTS} attempts failed`, last);
}
