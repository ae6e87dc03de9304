/**
 * Rolling out an attestation config to a running cluster (adapter, @kubernetes/client-node): one
 * server-side apply of the `attestationConfig` key of ConfigMap kube-system/join-config, which every
 * join service mounts and reloads when the file changes. Only that key is applied (field manager
 * `confboot-rollout`), so the measurement salt and other keys of the ConfigMap stay as they are.
 */
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { call, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, KUBE_SYSTEM } from './api.js';

/** The ConfigMap the join service reads its attestation config from. */
export const JOIN_CONFIG_MAP = 'join-config';
/** Field manager of {@link rollOutAttestationConfig}. */
export const ROLLOUT_FIELD_MANAGER = 'confboot-rollout';

/**
 * Applies `attestationConfig` (JSON text) as the `attestationConfig` key of ConfigMap
 * kube-system/join-config. Rejects like every Kubernetes call here (`unavailable` when the API
 * server cannot be reached).
 */
export async function rollOutAttestationConfig(
  kubeConfig: KubeConfig,
  attestationConfig: string,
  options: { requestTimeoutInMs?: number } = {},
): Promise<void> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await call(
    `applying ConfigMap ${KUBE_SYSTEM}/${JOIN_CONFIG_MAP}`,
    options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
    () =>
      core.patchNamespacedConfigMap(
        {
          name: JOIN_CONFIG_MAP,
          namespace: KUBE_SYSTEM,
          body: {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: JOIN_CONFIG_MAP, namespace: KUBE_SYSTEM },
            data: { attestationConfig },
          },
          fieldManager: ROLLOUT_FIELD_MANAGER,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      ),
  );
}
