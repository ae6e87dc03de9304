/**
 * Emergency SSH on a node: what the join request says about the node's SSH host key (fields 4 and
 * 5), and the files sshd reads afterwards: the cluster's SSH CA (`TrustedUserCAKeys`) and the host
 * certificate (`HostCertificate`). A joining node writes both from its join ticket; the first
 * control plane, which gets no ticket, derives the CA from its KMS and signs its own host
 * certificate. A node without a host key (no sshd) sends none and writes nothing. Reading the host
 * key happens before the node lock and never stops a join: a failure is logged and no key is sent.
 */
import type { Clock } from '../ports/clock.js';
import { messageOf } from '../ports/errors.js';
import type { FileWriter } from '../ports/file-writer.js';
import type { KMS } from '../ports/kms.js';
import type { Logger } from '../ports/logger.js';
import type { Random } from '../ports/random.js';
import type { SshHostKey } from '../ports/ssh-host-key.js';
import type { JoinTicket } from '../ports/types.js';
import { DEFAULT_SSH_PATHS, SshCertificateAuthority, type SshPaths } from './ssh-ca.js';
import { CERT_NONCE_LENGTH } from './ssh-certificate.js';
import { parseSshPublicKey } from './ssh-keys.js';
import { REQUEST_FIELD_LIMITS } from './ticket-request.js';

/** Fields 4 and 5 of a join request. */
export interface HostKeyRequest {
  /** Wire format; empty when the node has no host key. */
  hostPublicKey: Uint8Array;
  hostCertificatePrincipals: string[];
}

/** No host key: emergency SSH is not set up on this node. */
export const NO_HOST_KEY: Readonly<HostKeyRequest> = Object.freeze({
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
});

/**
 * The node's host key and names for its join request, within the request limits (at most 16
 * names, first ones kept). Without a host key port, without a host key, or when reading it fails
 * (logged): {@link NO_HOST_KEY}.
 */
export async function hostKeyRequest(
  hostKey: SshHostKey | undefined,
  logger: Logger,
): Promise<HostKeyRequest> {
  if (hostKey === undefined) return NO_HOST_KEY;
  try {
    const publicKey = await hostKey.publicKey();
    if (publicKey === undefined) {
      logger.info('No SSH host key: emergency SSH is not set up on this node');
      return NO_HOST_KEY;
    }
    parseSshPublicKey(publicKey, 'SSH host key');
    const names = (await hostKey.principals()).filter(
      (p) => p !== '' && p.length <= REQUEST_FIELD_LIMITS.hostCertificatePrincipalChars,
    );
    return {
      hostPublicKey: publicKey,
      hostCertificatePrincipals: names.slice(0, REQUEST_FIELD_LIMITS.hostCertificatePrincipals),
    };
  } catch (err) {
    logger.warn('Could not read the SSH host key; joining without emergency SSH', { error: messageOf(err) });
    return NO_HOST_KEY;
  }
}

/**
 * Writes the CA key and host certificate of a join ticket where sshd reads them, when the node sent
 * a host key (`request`); fields the ticket left empty are not written. Rejects as the file writer
 * does (an existing file is an error).
 */
export async function writeTicketSshFiles(
  files: FileWriter,
  request: HostKeyRequest,
  ticket: Pick<JoinTicket, 'authorizedCaPublicKey' | 'hostCertificate'>,
  paths: Pick<SshPaths, 'caPublicKeyPath' | 'hostCertificatePath'> = DEFAULT_SSH_PATHS,
): Promise<void> {
  if (request.hostPublicKey.length === 0) return;
  if (ticket.authorizedCaPublicKey.length > 0)
    await files.writeExclusive(paths.caPublicKeyPath, ticket.authorizedCaPublicKey);
  if (ticket.hostCertificate.length > 0)
    await files.writeExclusive(paths.hostCertificatePath, ticket.hostCertificate);
}

/** What the first control plane uses to set up emergency SSH without a join ticket. */
export interface InitSshDeps {
  kms: Pick<KMS, 'getDataKey'>;
  files: FileWriter;
  clock: Clock;
  random: Pick<Random, 'bytes'>;
}

/**
 * On the node that initialises the cluster: derives the CA from the KMS (data key
 * `ca_emergency_ssh`), signs a host certificate for the node's host key naming its names and
 * `extraPrincipals` (the API server's certificate SANs, as upstream), and writes both. Does nothing
 * when `request` has no host key. Rejects as the KMS or the file writer does.
 */
export async function writeInitSshFiles(
  deps: InitSshDeps,
  request: HostKeyRequest,
  extraPrincipals: readonly string[],
  paths: Pick<SshPaths, 'caPublicKeyPath' | 'hostCertificatePath'> = DEFAULT_SSH_PATHS,
): Promise<void> {
  if (request.hostPublicKey.length === 0) return;
  const ca = await SshCertificateAuthority.fromKms(deps.kms);
  const principals = [...new Set([...request.hostCertificatePrincipals, ...extraPrincipals])].filter(
    (p) => p !== '' && !/[\s,]/.test(p),
  );
  const encode = (s: string) => new TextEncoder().encode(s);
  await deps.files.writeExclusive(paths.caPublicKeyPath, encode(ca.authorizedKey()));
  if (principals.length === 0) return;
  const cert = ca.signHostCertificate({
    hostKey: parseSshPublicKey(request.hostPublicKey, 'SSH host key'),
    principals,
    now: deps.clock.now(),
    nonce: deps.random.bytes(CERT_NONCE_LENGTH),
  });
  await deps.files.writeExclusive(paths.hostCertificatePath, encode(cert));
}
