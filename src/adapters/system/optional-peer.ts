/**
 * The packages confboot loads only where they are used. Optional peer dependencies, which an install
 * gets only when the user adds them: the cloud SDKs and the Kubernetes client, imported where a
 * cloud's API or the Kubernetes API is actually used. Optional dependencies, which `npm install
 * confboot` brings and `--omit=optional` leaves out: what only the services run on (gRPC, their
 * logger, their metrics, the node's DI container). A verifier's install (`npm install confboot
 * --omit=optional --omit=peer`) lacks all of them: `confboot/verify`, `confboot/ports`,
 * `confboot/testing` and the `confboot attestation` commands load none of them.
 * {@link importOptionalPeer} wraps such a lazy import so a missing package is reported in one line
 * that names it and the command that installs it, instead of Node's ERR_MODULE_NOT_FOUND with a path.
 */
import { ConfbootError, messageOf } from '../../ports/errors.js';

/** A package confboot loads lazily: the version range it declares, what needs it, and how it is declared. */
export interface OptionalPeer {
  range: string;
  neededFor: string;
  /** `peer`: an optional peer dependency; `optional`: an optional dependency (installed by default). */
  declared?: 'peer' | 'optional';
}

/**
 * Every lazily loaded package: package.json's optional peerDependencies and its optionalDependencies
 * (`declared: 'optional'`), held equal by a test.
 */
export const OPTIONAL_PEERS: Readonly<Record<string, OptionalPeer>> = Object.freeze({
  '@aws-sdk/client-ec2': { range: '^3.1169.0', neededFor: 'AWS (EC2 metadata and AMI lookups)' },
  '@aws-sdk/client-elastic-load-balancing-v2': {
    range: '^3.1142.0',
    neededFor: 'AWS (load balancer endpoints)',
  },
  '@aws-sdk/client-resource-groups-tagging-api': { range: '^3.1142.0', neededFor: 'AWS (tagged instances)' },
  '@azure/arm-compute': { range: '^24.1.0', neededFor: 'Azure (instance metadata)' },
  '@azure/arm-network': { range: '^36.0.0', neededFor: 'Azure (network metadata)' },
  '@google-cloud/compute': { range: '^7.8.0', neededFor: 'Google Cloud (instances and shielded identities)' },
  '@grpc/grpc-js': {
    range: '~1.14.7',
    neededFor: 'its gRPC services and clients (join, key service, bootstrapper, init)',
    declared: 'optional',
  },
  '@kubernetes/client-node': { range: '2.0.1', neededFor: 'the Kubernetes API' },
  'google-auth-library': { range: '^9.15.1', neededFor: 'Google Cloud credentials' },
  inversify: { range: '^8.2.3', neededFor: "the node's wiring (bootstrapper)", declared: 'optional' },
  pino: { range: '^10.4.0', neededFor: "the services' logs", declared: 'optional' },
  'prom-client': { range: '^15.1.3', neededFor: "the services' metrics", declared: 'optional' },
});

/** The package a module-not-found error names (`Cannot find package 'x' imported from …`), if any. */
function missingPackageOf(err: unknown): string | undefined {
  if ((err as { code?: unknown } | null)?.code !== 'ERR_MODULE_NOT_FOUND') return undefined;
  const m = /Cannot find package '((?:@[^/']+\/)?[^/']+)[^']*'/.exec(messageOf(err));
  return m?.[1];
}

/**
 * The one-line error for a missing optional peer, or undefined when `err` is not about one.
 * @param peers the table to look the package up in; default {@link OPTIONAL_PEERS}
 */
export function missingPeerError(
  err: unknown,
  peers: Readonly<Record<string, OptionalPeer>> = OPTIONAL_PEERS,
): ConfbootError | undefined {
  const pkg = missingPackageOf(err);
  const peer = pkg === undefined ? undefined : peers[pkg];
  if (pkg === undefined || peer === undefined) return undefined;
  return new ConfbootError(
    'failed-precondition',
    `${pkg} is not installed: confboot needs it for ${peer.neededFor} (${peer.declared === 'optional' ? 'an optional dependency this install left out' : 'an optional peer dependency'}); install it with npm install ${pkg}@${peer.range}`,
    { cause: err, recoverable: false },
  );
}

/**
 * Runs `load` (a dynamic import of an optional peer, or of a module that imports one) and turns a
 * missing optional peer into {@link missingPeerError}'s one-line error; other failures pass as they are.
 */
export async function importOptionalPeer<T>(
  load: () => Promise<T>,
  peers: Readonly<Record<string, OptionalPeer>> = OPTIONAL_PEERS,
): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw missingPeerError(err, peers) ?? err;
  }
}
