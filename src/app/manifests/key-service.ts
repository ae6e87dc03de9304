/**
 * The key service's objects: its Deployment (two replicas on the control planes), its ClusterIP
 * Service, its PodDisruptionBudget and the NetworkPolicy that lets only join-service pods reach it.
 */
import type {
  V1Container,
  V1Deployment,
  V1NetworkPolicy,
  V1NetworkPolicyIngressRule,
  V1PodDisruptionBudget,
  V1Service,
} from '@kubernetes/client-node';
import { MASTER_SECRET_NAME } from '../../adapters/kubernetes/names.js';
import { KEY_SERVICE_TLS_SECRET } from '../../adapters/pki/key-service-tls.js';
import { KEY_SERVICE_PORT, MASTER_SECRET_PATH, SALT_PATH, SERVICE_BASE_PATH } from '../defaults.js';
import {
  type BuildContext,
  controlPlaneOnly,
  hardened,
  IMAGE_UID,
  KEY_SERVICE_MEMORY_MIB,
  KEY_SERVICE_REPLICAS,
  KEY_SERVICE_TLS_DIR,
  labels,
  type ManifestBuilder,
  meta,
  resources,
  runtimeDefaultSeccomp,
  SECRET_FILE_MODE,
  selector,
} from './common.js';

/** The key service's Deployment. */
function keyServiceDeployment({ image, mtls }: BuildContext): V1Deployment {
  const keyContainer: V1Container = {
    name: 'key-service',
    image,
    args: [
      'key-service',
      `--master-secret-file=${MASTER_SECRET_PATH}`,
      `--salt-file=${SALT_PATH}`,
      `--listen=0.0.0.0:${KEY_SERVICE_PORT}`,
      ...(mtls
        ? [
            `--tls-cert=${KEY_SERVICE_TLS_DIR}/tls.crt`,
            `--tls-key=${KEY_SERVICE_TLS_DIR}/tls.key`,
            `--client-ca=${KEY_SERVICE_TLS_DIR}/ca.crt`,
          ]
        : []),
    ],
    ports: [{ name: 'grpc', containerPort: KEY_SERVICE_PORT, protocol: 'TCP' }],
    // The port opens only once the master secret and salt are read (the service keeps no other
    // state), so a TCP connect is readiness; a kubelet gRPC probe could not present the client
    // certificate that mutual TLS demands.
    livenessProbe: { tcpSocket: { port: KEY_SERVICE_PORT }, periodSeconds: 10, failureThreshold: 3 },
    readinessProbe: { tcpSocket: { port: KEY_SERVICE_PORT }, periodSeconds: 5, failureThreshold: 2 },
    resources: resources('50m', KEY_SERVICE_MEMORY_MIB),
    securityContext: hardened,
    volumeMounts: [
      { name: 'master-secret', mountPath: SERVICE_BASE_PATH, readOnly: true },
      ...(mtls ? [{ name: 'tls', mountPath: KEY_SERVICE_TLS_DIR, readOnly: true }] : []),
    ],
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta('key-service', 'key-service', 'server'),
    spec: {
      replicas: KEY_SERVICE_REPLICAS,
      selector: { matchLabels: selector('key-service') },
      template: {
        metadata: { labels: labels('key-service', 'server') },
        spec: {
          automountServiceAccountToken: false,
          priorityClassName: 'system-cluster-critical',
          ...controlPlaneOnly,
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selector('key-service') },
            },
          ],
          securityContext: {
            runAsNonRoot: true,
            runAsUser: IMAGE_UID,
            runAsGroup: IMAGE_UID,
            fsGroup: IMAGE_UID,
            ...runtimeDefaultSeccomp,
          },
          containers: [keyContainer],
          volumes: [
            {
              name: 'master-secret',
              secret: {
                secretName: MASTER_SECRET_NAME,
                defaultMode: SECRET_FILE_MODE,
                items: [
                  { key: 'mastersecret', path: MASTER_SECRET_PATH.slice(SERVICE_BASE_PATH.length + 1) },
                  { key: 'salt', path: SALT_PATH.slice(SERVICE_BASE_PATH.length + 1) },
                ],
              },
            },
            ...(mtls
              ? [
                  {
                    name: 'tls',
                    secret: { secretName: KEY_SERVICE_TLS_SECRET, defaultMode: SECRET_FILE_MODE },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
}

/** The key service's Deployment, Service, PodDisruptionBudget and NetworkPolicy. */
export const keyServiceObjects: ManifestBuilder = (context) => {
  const keyService: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('key-service', 'key-service', 'server'),
    spec: {
      type: 'ClusterIP',
      selector: selector('key-service'),
      ports: [{ name: 'grpc', protocol: 'TCP', port: KEY_SERVICE_PORT, targetPort: KEY_SERVICE_PORT }],
    },
  };
  const keyPdb: V1PodDisruptionBudget = {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: meta('key-service', 'key-service', 'server'),
    spec: { maxUnavailable: 1, selector: { matchLabels: selector('key-service') } },
  };
  const keyPolicy: V1NetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta('key-service', 'key-service', 'server'),
    spec: {
      podSelector: { matchLabels: selector('key-service') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        // The client's TypeScript name of `from` is `_from` (a reserved word); YAML wants `from`.
        {
          from: [{ podSelector: { matchLabels: selector('join-service') } }],
          ports: [{ protocol: 'TCP', port: KEY_SERVICE_PORT }],
        } as V1NetworkPolicyIngressRule,
      ],
      egress: [],
    },
  };
  return [
    {
      comment: context.mtls
        ? ' Key service: derives disk keys and the measurement secret from the master secret (HKDF).\n It serves only clients with a certificate under its client CA (mutual TLS): create the\n Secrets key-service-tls and join-service-key-service-tls first, with\n `confboot manifests --tls-secrets | kubectl apply -f -`. The NetworkPolicy below limits who\n can connect at all.'
        : ' Key service: derives disk keys and the measurement secret from the master secret (HKDF).\n Rendered without mutual TLS: its plain-gRPC port hands those keys to anyone who reaches it,\n and only the NetworkPolicy below keeps other pods out.',
      object: keyServiceDeployment(context),
    },
    { comment: ' The key service inside the cluster only (ClusterIP).', object: keyService },
    { comment: ' Drains take down at most one key-service pod at a time.', object: keyPdb },
    {
      comment:
        " Only join-service pods may reach the key service, and the key service reaches nothing.\n Needs a network plugin that enforces NetworkPolicy (Calico, Cilium, ...). The kubelet's\n probes still arrive: a pod cannot block traffic from its own node.",
      object: keyPolicy,
    },
  ];
};
