/**
 * The Kubernetes manifests of a confboot cluster (app layer), rendered per cloud and attestation
 * variant: the join service (DaemonSet on every control plane, NodePort), the key service
 * (Deployment, ClusterIP), their configuration, a NetworkPolicy that lets only join-service pods
 * reach the key service, PodDisruptionBudgets, the DiskBinding CustomResourceDefinition and the
 * join service's RBAC (exactly the Kubernetes API calls of src/adapters/kubernetes/api.ts), and the
 * node operator (Deployment, ServiceAccount, its least-privilege ClusterRole and binding).
 *
 * Each family of objects has its own builder (join-service.ts, access.ts, key-service.ts,
 * node-operator.ts);
 * {@link MANIFEST_BUILDERS} lists them in apply order.
 *
 * The targets come from the registries (src/app/registry): every cloud with every variant its nodes
 * run, each of which the join service validates. The objects are the API's JSON (field names as
 * kubectl sends them). deploy/kubernetes/ holds them as a kustomize base and overlays (kustomize.ts,
 * `confboot manifests --all --out deploy/kubernetes`); test/deploy/manifests.test.ts checks that the
 * tree is current, that every overlay renders to these objects, and validates every object against
 * Kubernetes' OpenAPI schemas.
 */
import { Document } from 'yaml';
import type { Variant } from '../../ports/variant.js';
import type { JoinServiceCsp } from '../join-service/production.js';
import { cloudNames, cloudVariants, isCloud, variantEntry } from '../registry/index.js';
import { crdObjects, joinServiceAccessObjects } from './access.js';
import {
  type BuildContext,
  DEFAULT_IMAGE,
  type DeployTarget,
  type ManifestBuilder,
  type RenderedObject,
} from './common.js';
import {
  AK_REGISTRY_VARIANTS,
  joinServiceConfigObjects,
  joinServiceWorkloadObjects,
} from './join-service.js';
import { keyServiceObjects } from './key-service.js';
import { nodeOperatorManifest } from './node-operator.js';

/** Variants the join service on `cloud` can validate, the cloud's default first. */
export function deployVariants(cloud: JoinServiceCsp): Variant[] {
  return cloudVariants(cloud);
}

/** Every cloud and variant the manifests are rendered for, in cloud registry order. */
export function deployTargets(): DeployTarget[] {
  return cloudNames().flatMap((cloud) => deployVariants(cloud).map((variant) => ({ cloud, variant })));
}

/** Options of {@link renderManifests}. */
export interface RenderOptions extends DeployTarget {
  /** Container image; default {@link DEFAULT_IMAGE}. */
  image?: string;
  /**
   * Mutual TLS between the join service and the key service, from the Secrets of
   * `confboot manifests --tls-secrets`; default true. False: plain gRPC, NetworkPolicy only.
   */
  keyServiceTls?: boolean;
  /** The operator's attestation config (JSON text) instead of the variant's template. */
  attestationConfig?: string;
  /** The cluster's measurement salt (32 bytes) instead of the placeholder. */
  measurementSalt?: Uint8Array;
  /** The cluster's ID (32 bytes) instead of an empty `clusterId` (the node operator then waits for it). */
  clusterId?: Uint8Array;
  /** openstack: the Nova compute endpoint instead of an empty `cloudApiEndpoint` (the join service waits for it). */
  cloudApiEndpoint?: string;
}

/** The object families in apply order: configuration and API objects before the workloads. */
export const MANIFEST_BUILDERS: readonly ManifestBuilder[] = [
  joinServiceConfigObjects,
  crdObjects,
  joinServiceAccessObjects,
  joinServiceWorkloadObjects,
  keyServiceObjects,
  nodeOperatorManifest,
];

/** What the builders render for `options`; throws on a cloud or variant that is not deployed. */
function buildContext(options: RenderOptions): BuildContext {
  const { cloud, variant } = options;
  if (!isCloud(cloud)) throw new Error(`unknown cloud "${cloud}" (want one of ${cloudNames().join(', ')})`);
  const variants = deployVariants(cloud);
  if (!variants.includes(variant))
    throw new Error(`cloud ${cloud} has no variant "${variant}" (want one of ${variants.join(', ')})`);
  return {
    cloud,
    variant,
    image: options.image ?? DEFAULT_IMAGE,
    snpTdx: variantEntry(variant).kind !== 'vtpm',
    mtls: options.keyServiceTls ?? true,
    akRegistry: AK_REGISTRY_VARIANTS.has(variant),
    ...(options.attestationConfig === undefined ? {} : { attestationConfig: options.attestationConfig }),
    ...(options.measurementSalt === undefined ? {} : { measurementSalt: options.measurementSalt }),
    ...(options.clusterId === undefined ? {} : { clusterId: options.clusterId }),
    ...(options.cloudApiEndpoint === undefined ? {} : { cloudApiEndpoint: options.cloudApiEndpoint }),
  };
}

/** The rendered objects for `options`, in apply order. */
export function renderObjects(options: RenderOptions): RenderedObject[] {
  const context = buildContext(options);
  return MANIFEST_BUILDERS.flatMap((build) => build(context));
}

/** The rendered manifests of `options` as one multi-document YAML file. */
export function renderManifests(options: RenderOptions): string {
  const header = [
    ` confboot manifests for cloud ${options.cloud}, attestation variant ${options.variant}.`,
    ` Generated by \`confboot manifests --cloud ${options.cloud} --variant ${options.variant}\` (src/app/manifests/manifests.ts);`,
    ' do not edit: change the generator, or the attestation config with --attestation-config F.',
    ' Apply with: confboot manifests --receipt-key-secret | kubectl apply -f -   (once: the join receipt key)',
    ...(options.keyServiceTls === false
      ? []
      : [
          '             confboot manifests --tls-secrets | kubectl apply -f -   (once: the mutual-TLS Secrets)',
        ]),
    '             kubectl apply -f <this file>',
  ].join('\n');
  return yamlFile(renderObjects(options), header);
}

/** Objects as YAML documents, each with its comment above it and `header` above the first. */
export function yamlFile(objects: readonly RenderedObject[], header?: string): string {
  return objects
    .map(({ comment, object }, i) => {
      const doc = new Document(object);
      doc.commentBefore = i === 0 && header !== undefined ? `${header}\n\n${comment}` : comment;
      return doc.toString({ lineWidth: 0 });
    })
    .join('---\n');
}
