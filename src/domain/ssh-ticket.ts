/**
 * Emergency SSH in a join ticket (fields 11 and 12): the cluster's SSH CA public key, which the node
 * writes for sshd's `TrustedUserCAKeys`, and a host certificate for the host key the node sent
 * (request field 4), which it writes for sshd's `HostCertificate`. Unlike upstream, which signs
 * whatever principals the node asks for (field 5), the certificate names only what the join service
 * bound to the caller: its node name and its addresses; other requested names are left out, and a
 * request that keeps none gets the node name and addresses. A node that sends no host key gets the
 * CA key and no certificate (upstream refuses the join).
 */
import type { Clock } from '../ports/clock.js';
import type { KMS } from '../ports/kms.js';
import type { Random } from '../ports/random.js';
import { SshCertificateAuthority } from './ssh-ca.js';
import { CERT_NONCE_LENGTH } from './ssh-certificate.js';
import { parseSshPublicKey, type SshPublicKey } from './ssh-keys.js';

/** What the join service bound to the caller: the names a host certificate may carry. */
export interface BoundNode {
  /** The node name of the kubelet certificate. */
  nodeName: string;
  /** The caller's addresses (its instance's, or its own address without a PeerIdentity). */
  addresses: readonly string[];
}

/** Fields 11 and 12 of a join ticket. */
export interface SshTicketFields {
  authorizedCaPublicKey: Uint8Array;
  hostCertificate: Uint8Array;
}

/**
 * The host key of a join request, or undefined when it sent none. Throws `invalid-argument` for a
 * malformed or uncertifiable key.
 */
export function requestedHostKey(hostPublicKey: Uint8Array): SshPublicKey | undefined {
  return hostPublicKey.length === 0 ? undefined : parseSshPublicKey(hostPublicKey, 'host public key');
}

/**
 * The principals of a node's host certificate: the requested ones that are the node's name (any
 * case) or one of its addresses, in request order without repeats; when none is left, the node name
 * and the addresses. `dropped` lists the requested names left out.
 */
export function hostCertificatePrincipals(
  requested: readonly string[],
  node: BoundNode,
): { principals: string[]; dropped: string[] } {
  const allowed = new Set([node.nodeName.toLowerCase(), ...node.addresses]);
  const principals: string[] = [];
  const dropped: string[] = [];
  for (const p of requested) {
    const folded = p.toLowerCase();
    if (!allowed.has(p) && !allowed.has(folded)) dropped.push(p);
    else if (!principals.includes(folded)) principals.push(folded);
  }
  if (principals.length > 0) return { principals, dropped };
  return { principals: [...new Set([node.nodeName, ...node.addresses])], dropped };
}

/** Signs the emergency SSH fields of join tickets; asks the key service for the CA once. */
export class SshTicketSigner {
  readonly #kms: Pick<KMS, 'getDataKey'>;
  readonly #clock: Clock;
  readonly #random: Pick<Random, 'bytes'>;
  /** The CA, once derived (it depends on the master secret alone); a failed request is not kept. */
  #ca: Promise<SshCertificateAuthority> | undefined;

  constructor(deps: { kms: Pick<KMS, 'getDataKey'>; clock: Clock; random: Pick<Random, 'bytes'> }) {
    this.#kms = deps.kms;
    this.#clock = deps.clock;
    this.#random = deps.random;
  }

  /** The cluster's CA, derived from the key service's data key the first time. */
  ca(): Promise<SshCertificateAuthority> {
    let pending = this.#ca;
    if (pending === undefined) {
      const asked = SshCertificateAuthority.fromKms(this.#kms);
      pending = asked;
      this.#ca = asked;
      asked.catch(() => {
        if (this.#ca === asked) this.#ca = undefined;
      });
    }
    return pending;
  }

  /**
   * Fields 11 and 12 for a node: the CA line, and with a host key a host certificate for
   * `principals` (from {@link hostCertificatePrincipals}). Rejects as the KMS does.
   */
  async fields(hostKey: SshPublicKey | undefined, principals: readonly string[]): Promise<SshTicketFields> {
    const ca = await this.ca();
    const encode = (s: string) => new TextEncoder().encode(s);
    return {
      authorizedCaPublicKey: encode(ca.authorizedKey()),
      hostCertificate:
        hostKey === undefined
          ? new Uint8Array(0)
          : encode(
              ca.signHostCertificate({
                hostKey,
                principals,
                now: this.#clock.now(),
                nonce: this.#random.bytes(CERT_NONCE_LENGTH),
              }),
            ),
    };
  }
}
