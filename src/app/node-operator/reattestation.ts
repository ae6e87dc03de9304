/**
 * The node operator's continuous re-attestation (app layer, wiring only): the domain
 * {@link Reattestation} over the Kubernetes API (joined nodes, EvidenceRecord annotation, Events,
 * the cordon), the verification service's HTTP client, prom-client metrics, and the validator the
 * join service builds (src/app/registry/validators.ts) for the variant from the attestation config
 * file in force. The file is read again each round and a new validator built when it changed, so a
 * mounted ConfigMap that is rolled out applies from the next round on. For vTPM variants the
 * node-lock register (PCR 15) is expected as a node of the cluster marks it (`clusterId`), not as the
 * zero the config expects of a node that has yet to join. The cluster ID is given as bytes or as a
 * file (`clusterIdPath`, 64 hex digits: the `clusterId` key of ConfigMap join-config the bring-up
 * writes), read again every round like the config, so a Deployment can start before it is known.
 */
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { HttpAttestationFetcher } from '../../adapters/http/verification-client.js';
import { KubeReattestationApi } from '../../adapters/kubernetes/reattestation-api.js';
import { KubeReattestationEvents } from '../../adapters/kubernetes/reattestation-events.js';
import { PromReattestationMetrics } from '../../adapters/ops/reattestation-metrics.js';
import { CryptoRandom } from '../../adapters/system/crypto-random.js';
import { Reattestation } from '../../domain/reattestation.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { ReattestationVerifier } from '../../ports/reattestation.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { CLUSTER_ID_HEX } from '../program/shared-options.js';
import { variantEntry } from '../registry/index.js';
import { withNodeLockMarked } from '../registry/node-lock-config.js';
import type { VariantLookupSettings } from '../registry/validator-deps.js';
import { buildValidator } from '../registry/validators.js';

/** What re-attestation is configured with (the node operator's flags). */
export interface ReattestationSettings {
  variant: Variant;
  /** The attestation config file in force (read every round). */
  attestationConfigPath: string;
  /** vTPM variants: the cluster's ID (32 bytes), which the node-lock register is expected marked with. */
  clusterId?: Uint8Array;
  /** vTPM variants, instead of `clusterId`: a file holding it in hex, read every round. */
  clusterIdPath?: string;
  /** The variant's attestation-key trust, as the join service reads it. */
  lookups: VariantLookupSettings;
  intervalMs: number;
  /** Cordon a node whose re-attestation failed. */
  cordon: boolean;
  /** The verification service's port on every node. */
  port: number;
  concurrency?: number;
  deadlineMs?: number;
}

/** Reads `path` or rejects `unavailable` naming `what`. */
async function readInForce(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ConfbootError('unavailable', `reading ${what} ${path}: ${messageOf(err)}`);
  }
}

/**
 * The cluster ID in the file at `path`: 64 hex digits, surrounding white space ignored.
 * @throws ConfbootError `unavailable` while the file is empty (the ID is not known yet),
 *   `invalid-argument` when it holds anything else
 */
export async function readClusterIdFile(path: string): Promise<Uint8Array> {
  const text = (await readInForce(path, 'the cluster ID')).toString('utf8').trim();
  if (text === '')
    throw new ConfbootError(
      'unavailable',
      `the cluster ID is not known yet: ${path} is empty (confboot init prints it; confboot apply writes it to ConfigMap kube-system/join-config, key clusterId)`,
    );
  if (!CLUSTER_ID_HEX.test(text))
    throw new ConfbootError('invalid-argument', `${path}: want the cluster ID as 64 hex digits`);
  return new Uint8Array(Buffer.from(text, 'hex'));
}

/**
 * The validator of the config file in force, rebuilt only when the file's bytes (or the cluster
 * ID's file) change.
 * @throws ConfbootError `invalid-argument` at once for a vTPM variant without a cluster ID
 */
export function fileVerifier(
  settings: Pick<
    ReattestationSettings,
    'variant' | 'attestationConfigPath' | 'clusterId' | 'clusterIdPath' | 'lookups'
  >,
  clock: Clock,
  logger: Logger,
): ReattestationVerifier {
  const entry = variantEntry(settings.variant);
  const vtpm = entry.kind === 'vtpm';
  if (vtpm && settings.clusterId === undefined && settings.clusterIdPath === undefined)
    throw new ConfbootError(
      'invalid-argument',
      `re-attesting ${settings.variant} nodes needs the cluster ID (the node-lock register of a joined node is marked with it)`,
    );
  const lookups = entry.lookups(settings.lookups, clock);
  const clusterId = async (): Promise<Uint8Array | undefined> => {
    if (!vtpm) return undefined;
    if (settings.clusterIdPath === undefined) return settings.clusterId;
    return readClusterIdFile(settings.clusterIdPath);
  };
  let last: { key: string; validator: Validator } | undefined;
  return {
    async current() {
      const [bytes, id] = await Promise.all([
        readInForce(settings.attestationConfigPath, 'the attestation config'),
        clusterId(),
      ]);
      const key = `${id === undefined ? '' : Buffer.from(id).toString('hex')}\n${bytes.toString('utf8')}`;
      if (last?.key === key) return last.validator;
      const config = id === undefined ? bytes : withNodeLockMarked(settings.variant, bytes, id);
      const validator = buildValidator(settings.variant, config, { clock, logger, ...(await lookups) });
      if (last !== undefined) logger.info('Re-attestation uses the changed attestation config');
      last = { key, validator };
      return validator;
    },
  };
}

/** Re-attestation and what it reports to. */
export interface ReattestationWiring {
  reattestation: Reattestation;
  metrics: PromReattestationMetrics;
  events: KubeReattestationEvents;
  api: KubeReattestationApi;
}

/** Builds re-attestation on `kubeConfig` as `settings` say. */
export function wireReattestation(
  settings: ReattestationSettings,
  deps: {
    kubeConfig: KubeConfig;
    clock: Clock;
    logger: Logger;
    requestTimeoutInMs?: number;
    instance?: string;
  },
): ReattestationWiring {
  const { kubeConfig, clock, logger } = deps;
  const timeout =
    deps.requestTimeoutInMs === undefined ? {} : { requestTimeoutInMs: deps.requestTimeoutInMs };
  const api = new KubeReattestationApi({ kubeConfig, ...timeout });
  const events = new KubeReattestationEvents({
    kubeConfig,
    clock,
    logger,
    ...timeout,
    ...(deps.instance === undefined ? {} : { instance: deps.instance }),
  });
  const metrics = new PromReattestationMetrics();
  const reattestation = new Reattestation({
    targets: api,
    verifier: fileVerifier(settings, clock, logger),
    fetcher: new HttpAttestationFetcher(),
    records: api,
    events,
    metrics,
    ...(settings.cordon ? { cordoner: api } : {}),
    clock,
    random: new CryptoRandom(),
    logger,
    port: settings.port,
    ...(settings.concurrency === undefined ? {} : { concurrency: settings.concurrency }),
    ...(settings.deadlineMs === undefined ? {} : { deadlineMs: settings.deadlineMs }),
  });
  return { reattestation, metrics, events, api };
}
