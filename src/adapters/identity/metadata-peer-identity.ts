/**
 * PeerIdentity over the cloud's instance metadata (adapter layer, src/adapters/identity): the join
 * service asks MetadataAPI.list() which instance of this cluster has the caller's address (its VPC
 * IP). The list is kept for a short time (default 10 s, on the injected Clock) so a burst of joins
 * costs one cloud call, and is fetched again on a miss so a node that was just created is found;
 * concurrent fetches share one call. A metadata failure becomes `unavailable` (the node retries).
 */
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import { canonicalIp } from '../../ports/peer-address.js';
import type { PeerIdentity, PeerInstance } from '../../ports/peer-identity.js';
import type { InstanceMetadata } from '../../ports/types.js';

/** Default time a fetched instance list is used before it is fetched again. */
export const DEFAULT_PEER_IDENTITY_TTL_MS = 10_000;
/** Default shortest time between two fetches caused by unknown addresses. */
export const DEFAULT_PEER_IDENTITY_MISS_REFRESH_MS = 1_000;
/** Default bound on one metadata list call. */
export const DEFAULT_PEER_IDENTITY_TIMEOUT_MS = 10_000;

/** Options of {@link MetadataPeerIdentity}. */
export interface MetadataPeerIdentityOptions {
  /** How long a fetched list is used (default {@link DEFAULT_PEER_IDENTITY_TTL_MS}). */
  ttlMs?: number;
  /**
   * A miss fetches the list again only if the current one is at least this old (default
   * {@link DEFAULT_PEER_IDENTITY_MISS_REFRESH_MS}), so callers from unknown addresses cannot turn
   * every request into a cloud API call.
   */
  missRefreshMs?: number;
  /** Bound on one metadata list call (default {@link DEFAULT_PEER_IDENTITY_TIMEOUT_MS}). */
  timeoutInMs?: number;
  logger?: Logger;
}

interface Snapshot {
  at: number;
  byIp: Map<string, InstanceMetadata[]>;
}

/** PeerIdentity backed by MetadataAPI.list(), matched on the instances' VPC IPs. */
export class MetadataPeerIdentity implements PeerIdentity {
  readonly #metadata: Pick<MetadataAPI, 'list'>;
  readonly #clock: Pick<Clock, 'now'>;
  readonly #ttlMs: number;
  readonly #missRefreshMs: number;
  readonly #timeoutInMs: number;
  readonly #logger: Logger | undefined;
  #snapshot: Snapshot | undefined;
  #inFlight: Promise<Snapshot> | undefined;

  constructor(
    metadata: Pick<MetadataAPI, 'list'>,
    clock: Pick<Clock, 'now'>,
    options: MetadataPeerIdentityOptions = {},
  ) {
    this.#metadata = metadata;
    this.#clock = clock;
    this.#ttlMs = options.ttlMs ?? DEFAULT_PEER_IDENTITY_TTL_MS;
    this.#missRefreshMs = options.missRefreshMs ?? DEFAULT_PEER_IDENTITY_MISS_REFRESH_MS;
    this.#timeoutInMs = options.timeoutInMs ?? DEFAULT_PEER_IDENTITY_TIMEOUT_MS;
    this.#logger = options.logger;
  }

  /**
   * The instance whose VPC IP is `peerIp`, from a list at most `ttlMs` old; on a miss (or an
   * instance without name or role yet) the list is fetched again once. Rejects `unavailable` when
   * metadata cannot be listed.
   */
  async resolve(peerIp: string): Promise<PeerInstance | undefined> {
    const ip = canonicalIp(peerIp);
    if (ip === undefined) return undefined;
    const now = this.#clock.now().getTime();
    let snapshot = this.#snapshot;
    let fetched = false;
    if (snapshot === undefined || now - snapshot.at >= this.#ttlMs) {
      snapshot = await this.#fetch(peerIp);
      fetched = true;
    }
    let found = this.#match(snapshot, ip);
    if (!complete(found) && !fetched && now - snapshot.at >= this.#missRefreshMs) {
      snapshot = await this.#fetch(peerIp);
      found = this.#match(snapshot, ip);
    }
    if (found === undefined) return undefined;
    return {
      name: found.name,
      ips: [found.vpcIp],
      role: found.role,
      ...(found.instanceId ? { instanceId: found.instanceId } : {}),
    };
  }

  #match(snapshot: Snapshot, ip: string): InstanceMetadata | undefined {
    const matches = snapshot.byIp.get(ip) ?? [];
    if (matches.length > 1) {
      // Two instances claiming one address: trust neither.
      this.#logger?.warn('Several cluster instances report the same VPC IP; refusing to resolve it', {
        ip,
        names: matches.map((m) => m.name),
      });
      return undefined;
    }
    return matches[0];
  }

  #fetch(peerIp: string): Promise<Snapshot> {
    this.#inFlight ??= (async () => {
      try {
        const instances = await this.#metadata.list({ timeoutInMs: this.#timeoutInMs });
        const byIp = new Map<string, InstanceMetadata[]>();
        for (const i of instances) {
          const ip = canonicalIp(i.vpcIp);
          if (ip === undefined) continue;
          byIp.set(ip, [...(byIp.get(ip) ?? []), i]);
        }
        const snapshot = { at: this.#clock.now().getTime(), byIp };
        this.#snapshot = snapshot;
        return snapshot;
      } finally {
        this.#inFlight = undefined;
      }
    })();
    return this.#inFlight.catch((err: unknown) => {
      const message = messageOf(err);
      throw new ConfbootError(
        'unavailable',
        `resolving caller ${peerIp} through the cloud's instance metadata: ${message}`,
        { cause: err },
      );
    });
  }
}

function complete(i: InstanceMetadata | undefined): boolean {
  return i !== undefined && i.name !== '' && i.role !== 'Unknown';
}
