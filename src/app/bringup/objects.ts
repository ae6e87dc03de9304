/**
 * What a cluster needs in its Kubernetes API after `confboot init` (app layer): the objects
 * `confboot apply` creates through the admin kubeconfig. They are the objects of `confboot
 * manifests` — join service, key service, node operator, and the CustomResourceDefinitions
 * NodeVersion, JoiningNode, DiskBinding and EvidenceRecord — from the same generator, with the
 * cluster's attestation config and measurement salt, plus what the join service reads at run time:
 * the master-secret Secret, the components ConfigMap and the NodeVersion naming it, the key-service
 * TLS Secrets and the join receipt key Secret.
 */
import { type KubernetesObject, loadYaml, type V1ConfigMap, type V1Secret } from '@kubernetes/client-node';
import { NODE_VERSION_NAME, UPDATE_GROUP, UPDATE_VERSION } from '../../adapters/kubernetes/api.js';
import { MASTER_SECRET_NAME } from '../../adapters/kubernetes/names.js';
import { type KeyServiceTls, keyServiceTlsSecrets } from '../../adapters/pki/key-service-tls.js';
import { clusterIdFromMaster } from '../../domain/key-derivation.js';
import type { Component } from '../../ports/types.js';
import { NAMESPACE } from '../manifests/common.js';
import { receiptKeySecret } from '../manifests/join-service.js';
import { type RenderOptions, renderObjects } from '../manifests/manifests.js';

/** Name of the components ConfigMap the NodeVersion references. */
export const COMPONENTS_CONFIGMAP_NAME = 'k8s-components';

/**
 * How an object may be changed by a later run. `apply`: server-side apply, the cluster converges
 * to the rendered object. `create-only`: created when missing, never replaced (keys and certificates
 * made once: a second run must not rotate them behind the cluster's back); `must-match` also
 * refuses when the existing object's data differs (the master secret: replacing it would lock every
 * state disk).
 */
export type ApplyMode = 'apply' | 'create-only' | 'must-match';

/** One object to bring up. */
export interface BringupObject {
  object: KubernetesObject;
  mode: ApplyMode;
  /** True for objects whose content is secret: never printed, not even in a dry run. */
  secret?: boolean;
}

/** The cluster's own values. */
export interface BringupInput extends RenderOptions {
  masterSecret: Uint8Array;
  masterSalt: Uint8Array;
  measurementSalt: Uint8Array;
  /** The attestation config the operator gave to `init` (JSON text). */
  attestationConfig: string;
  /** The components the cluster vouches for (possibly none). */
  components: readonly Component[];
  kubernetesVersion: string;
  /** Key-service TLS material, used only when its Secrets do not exist yet. */
  tlsMaterial?: KeyServiceTls;
  /** The join receipt key (PKCS#8 PEM), used only when its Secret does not exist yet. */
  receiptKeyPem?: string;
}

const labels = { 'app.kubernetes.io/part-of': 'confboot' };

/** Every object, in the order they are applied (definitions before their instances). */
export function bringupObjects(input: BringupInput): BringupObject[] {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
  // join-config carries input.attestationConfig, input.measurementSalt and the cluster ID (RenderOptions).
  // The manifests are the API's JSON; the client's model names a few fields differently
  // (NetworkPolicy `_from`, `x_kubernetes_preserve_unknown_fields`) and sends only what it knows.
  const clusterId = clusterIdFromMaster(input.masterSecret, input.masterSalt, input.measurementSalt);
  const rendered = renderObjects({ ...input, clusterId }).map((r) =>
    loadYaml<KubernetesObject>(JSON.stringify(r.object)),
  );
  const crds = rendered.filter((o) => o.kind === 'CustomResourceDefinition');
  const rest = rendered.filter((o) => o.kind !== 'CustomResourceDefinition');
  const masterSecret: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: MASTER_SECRET_NAME, namespace: NAMESPACE, labels },
    type: 'Opaque',
    data: { mastersecret: b64(input.masterSecret), salt: b64(input.masterSalt) },
  };
  const components: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: COMPONENTS_CONFIGMAP_NAME, namespace: NAMESPACE, labels },
    data: {
      components: JSON.stringify(
        input.components.map((c) => ({
          url: c.url,
          hash: c.hash,
          install_path: c.installPath,
          extract: c.extract,
        })),
      ),
    },
  };
  const nodeVersion: KubernetesObject & { spec: Record<string, unknown> } = {
    apiVersion: `${UPDATE_GROUP}/${UPDATE_VERSION}`,
    kind: 'NodeVersion',
    metadata: { name: NODE_VERSION_NAME, labels },
    spec: {
      kubernetesClusterVersion: input.kubernetesVersion,
      kubernetesComponentsReference: COMPONENTS_CONFIGMAP_NAME,
    },
  };
  const tls = input.tlsMaterial ? keyServiceTlsSecrets(input.tlsMaterial, NAMESPACE).map(([, s]) => s) : [];
  const receiptKey = input.receiptKeyPem === undefined ? [] : [receiptKeySecret(input.receiptKeyPem)];
  return [
    ...crds.map((object) => ({ object, mode: 'apply' as const })),
    { object: masterSecret, mode: 'must-match', secret: true },
    ...tls.map((object) => ({ object, mode: 'create-only' as const, secret: true })),
    // Made once: every replica and restart signs receipts with it (one JWKS verifies them all).
    ...receiptKey.map((object) => ({ object, mode: 'create-only' as const, secret: true })),
    { object: components, mode: 'apply' },
    { object: nodeVersion, mode: 'apply' },
    ...rest.map((object) => ({ object, mode: 'apply' as const })),
  ];
}
