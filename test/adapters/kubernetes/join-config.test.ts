/**
 * rollOutAttestationConfig through the real @kubernetes/client-node against the FAKE Kubernetes API
 * server (src/testbed/simulated/simulated-kube-api.ts), which checks the server-side apply.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { rollOutAttestationConfig } from '../../../src/adapters/kubernetes/join-config.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FakeKubeApi } from './fake-kube-api.js';

const tmp = useTmpDirs('confboot-join-config-');
const apis: FakeKubeApi[] = [];
afterEach(async () => {
  for (const api of apis.splice(0)) await api.close();
});

async function cluster() {
  const api = await new FakeKubeApi().start();
  apis.push(api);
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(path, api.kubeconfig());
  return { api, kubeConfig: loadKubeConfig(path) };
}

describe('rollOutAttestationConfig against a fake Kubernetes API server', () => {
  it('applies the attestationConfig key of ConfigMap kube-system/join-config server-side, again on change', async () => {
    const { api, kubeConfig } = await cluster();
    const a = JSON.stringify({ measurementSets: [{ name: 'image-a', measurements: { 4: 'aa' } }] });
    await rollOutAttestationConfig(kubeConfig, a);
    expect(api.configMaps.get('join-config')?.data).toEqual({ attestationConfig: a });
    const b = JSON.stringify({ measurementSets: [{ name: 'image-b', measurements: { 4: 'bb' } }] });
    await rollOutAttestationConfig(kubeConfig, b);
    expect(api.configMaps.get('join-config')?.data).toEqual({ attestationConfig: b });
    const patches = api.requests.filter((r) => r.method === 'PATCH');
    expect(patches.map((r) => [r.path, r.contentType, r.query.fieldManager])).toEqual([
      [
        '/api/v1/namespaces/kube-system/configmaps/join-config',
        'application/apply-patch+yaml',
        'confboot-rollout',
      ],
      [
        '/api/v1/namespaces/kube-system/configmaps/join-config',
        'application/apply-patch+yaml',
        'confboot-rollout',
      ],
    ]);
    expect(api.violations).toEqual([]);
  });

  it('the fake refuses a config that is not a JSON object; the call rejects naming the ConfigMap', async () => {
    const { api, kubeConfig } = await cluster();
    await expect(rollOutAttestationConfig(kubeConfig, 'not json')).rejects.toThrow(
      /^applying ConfigMap kube-system\/join-config: HTTP 400/,
    );
    expect(api.violations).toEqual(['join-config apply: data.attestationConfig is not a JSON object']);
  });
});
