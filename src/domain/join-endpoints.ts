/**
 * The join service endpoints a node dials, for the join flow and the disk mapper's rejoin: the load
 * balancer first (a failed lookup is tolerated), then every control plane's VPC IP from a random
 * start, which spreads nodes over the control planes.
 */
import type { Clock } from '../ports/clock.js';
import { messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import { joinHostPort } from '../ports/peer-address.js';
import type { Random } from '../ports/random.js';
import { callWithTimeout } from './backoff.js';

/** What {@link joinServiceEndpoints} reads. */
export interface JoinEndpointDeps {
  metadata: Pick<MetadataAPI, 'list' | 'getLoadBalancerEndpoint'>;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
}

/**
 * Lists `host:port` endpoints of the join service. `excludeIp` (a control plane's own VPC IP) is
 * left out of the control-plane list. Metadata failures are logged and skipped; never rejects.
 */
export async function joinServiceEndpoints(
  deps: JoinEndpointDeps,
  port: number,
  metadataTimeoutMs: number,
  signal: AbortSignal,
  excludeIp = '',
): Promise<string[]> {
  const { metadata, clock, logger, random } = deps;
  const endpoints: string[] = [];
  try {
    const lb = await callWithTimeout(
      clock,
      'getting load balancer endpoint',
      metadataTimeoutMs,
      signal,
      (o) => metadata.getLoadBalancerEndpoint(o),
    );
    if (lb.host !== '') endpoints.push(joinHostPort(lb.host, port));
  } catch (err) {
    if (!signal.aborted) logger.warn('Failed to get load balancer endpoint', { error: messageOf(err) });
  }
  try {
    const peers = await callWithTimeout(clock, 'listing instances', metadataTimeoutMs, signal, (o) =>
      metadata.list(o),
    );
    const ips = peers
      .filter((p) => p.role === 'ControlPlane' && p.vpcIp !== '' && p.vpcIp !== excludeIp)
      .map((p) => p.vpcIp);
    if (ips.length > 0) {
      const start = Math.min(ips.length - 1, Math.floor(Math.max(0, random.float()) * ips.length));
      for (const ip of [...ips.slice(start), ...ips.slice(0, start)]) endpoints.push(joinHostPort(ip, port));
    }
  } catch (err) {
    if (!signal.aborted) logger.warn('Failed to list control-plane nodes', { error: messageOf(err) });
  }
  return endpoints;
}
