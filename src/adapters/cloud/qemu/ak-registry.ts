/**
 * The qemu-vtpm attestation keys a QEMU cluster's host registered, read from the QEMU metadata
 * server's identities file (`{"<hostname>": {"ip": "<address>", "attestationKeyPublic": "<base64
 * TPMT_PUBLIC>"}}`, as `confboot mini` writes it), re-read on every validation so VMs added later
 * are known. The key is looked up for the calling VM: the validation's peer address (the caller's
 * source address, which the attested TLS server passes) must be exactly one entry's `ip`, and only
 * that entry's AK is accepted. A call without a peer address, from an address no entry (or more
 * than one) has, or to a VM without a key finds nothing, so the document is refused. The address
 * binds as far as the network does: mini gives every VM a fixed address through a DHCP
 * reservation on a bridge only its VMs are on, the same trust the metadata server places in it.
 */
import { readFile } from 'node:fs/promises';
import type { AkRegistry, RegisteredAk } from '../../../ports/ak-registry.js';
import { canonicalIp } from '../../../ports/peer-address.js';
import type { CallOptions } from '../../../ports/types.js';

/** {@link AkRegistry} over an identities file, keyed by the caller's address. */
export class FileQemuAkRegistry implements AkRegistry {
  constructor(private readonly path: string) {}

  async registeredAk(options?: CallOptions): Promise<RegisteredAk> {
    const peer = options?.peerAddress;
    const ip = peer === undefined ? undefined : canonicalIp(peer);
    if (ip === undefined)
      return { attester: `a caller without a known address (${this.path})`, akPub: undefined };
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(this.path, 'utf8'));
    } catch (err) {
      throw new Error(`reading the registered attestation keys ${this.path}: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new Error(`${this.path}: expected a JSON object of identities`);
    const matches = Object.entries(parsed as Record<string, unknown>).filter(([, identity]) => {
      const at = (identity as { ip?: unknown } | null)?.ip;
      return typeof at === 'string' && canonicalIp(at) === ip;
    });
    if (matches.length !== 1) {
      const why = matches.length === 0 ? 'no VM' : `${matches.length} VMs`;
      return {
        attester: `the caller ${ip} (${why} registered at that address in ${this.path})`,
        akPub: undefined,
      };
    }
    const [name, identity] = matches[0] as [string, unknown];
    const ak = (identity as { attestationKeyPublic?: unknown }).attestationKeyPublic;
    return {
      attester: `${name} (${ip})`,
      akPub: typeof ak === 'string' && ak !== '' ? new Uint8Array(Buffer.from(ak, 'base64')) : undefined,
    };
  }
}
