/**
 * The control-plane agent's kubelet duties for the join service beyond the first start (part of
 * agent.ts): the receipt key a Secret would hold (a fresh P-256 key, 0600 in /run), and the projection
 * of ConfigMap kube-system/join-config (SIMULATED API server, in this process) onto the mounted
 * attestation config file: when an operator applies a new `attestationConfig`, it is written to a
 * temporary file renamed over the mounted one (what a kubelet's symlink swap amounts to), and the
 * join service, which watches the file's directory, reloads it.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { rename, writeFile } from 'node:fs/promises';
import type { FakeKubeApi } from '../../simulated/simulated-kube-api.js';

/** Writes a fresh receipt key (PKCS#8 PEM, ECDSA P-256) to `path`, readable by its owner only. */
export async function writeReceiptKey(path: string): Promise<void> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await writeFile(path, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
}

/**
 * Every `intervalMs`, projects join-config's `attestationConfig` onto `path` when it changed; calls
 * `onSynced` with the SHA-256 of what it wrote. Returns the stop function.
 */
export function syncJoinConfig(
  api: FakeKubeApi,
  path: string,
  onSynced: (sha256: string) => void,
  intervalMs = 2000,
): () => void {
  let last: string | undefined;
  let busy = false;
  const timer = setInterval(() => {
    const text = api.configMaps.get('join-config')?.data?.attestationConfig;
    if (busy || typeof text !== 'string' || text === last) return;
    busy = true;
    const tmp = `${path}.sync`;
    writeFile(tmp, text)
      .then(() => rename(tmp, path))
      .then(() => {
        last = text;
        onSynced(createHash('sha256').update(text).digest('hex'));
      })
      .catch(() => {})
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  return () => clearInterval(timer);
}
