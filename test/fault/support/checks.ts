/**
 * What the fault-injection suite asserts about a node's persistent state after a fault (test code
 * only): a joined node is complete (PCR 15 holds the cluster ID, the state disk opens only with the
 * issued key and its LUKS2 token says initialized, kubelet credentials and node_state.json are whole
 * and match); a node that never passed the lock is untouched; a node that failed past the lock is
 * marked for reset and has nothing half-written. Disks are inspected with the REAL cryptsetup, not
 * through the node's fault-injecting wrapper.
 */
import { createPublicKey, X509Certificate } from 'node:crypto';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { expect } from 'vitest';
import { CryptsetupDisk, type StateDiskToken } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { decodeNodeState } from '../../../src/adapters/state/json-node-state-store.js';
import { expectedPcr15 } from '../../../src/adapters/tpm/pcr15-marker.js';
import { MEASUREMENT_SECRET_KEY_ID } from '../../../src/domain/key-derivation.js';
import { opensWithKey } from '../../../src/testbed/demo/state-disk.js';
import { pemSecrets, type Secret, searchSecrets } from '../../secrets/search.js';
import { type FaultCluster, type FaultNode, filesUnder, readIfExists } from './cluster.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

async function pcr15(node: FaultNode): Promise<string> {
  return hex((await node.tpm.readPcrs([15])).get(15) ?? new Uint8Array());
}

async function diskFacts(node: FaultNode): Promise<{ uuid: string; token: StateDiskToken | undefined }> {
  const disk = new CryptsetupDisk({
    devicePath: node.disk.imagePath,
    initialPassphrasePath: node.disk.initialPassphrasePath,
  });
  const release = await disk.open();
  try {
    return { uuid: await disk.uuid(), token: await disk.readToken() };
  } finally {
    await release();
  }
}

/** No temp files of the atomic file writer were left anywhere in the node's directory. */
function expectNoTempFiles(node: FaultNode): void {
  const leftovers = filesUnder(node.dir).filter((f) => f.endsWith('.tmp'));
  expect(leftovers, `${node.name}: temp files left behind`).toEqual([]);
}

/** The node joined and everything it wrote is whole and consistent. */
export async function expectJoinedCleanly(cluster: FaultCluster, node: FaultNode): Promise<void> {
  const name = node.name;
  expect(await pcr15(node), `${name}: PCR 15`).toBe(hex(expectedPcr15(await cluster.clusterId())));
  const { uuid, token } = await diskFacts(node);
  expect(token?.diskIsInitialized, `${name}: LUKS2 token diskIsInitialized`).toBe(true);
  const issued = await cluster.diskKey(uuid);
  expect(await opensWithKey(node.disk.imagePath, issued), `${name}: opens with the issued key`).toBe(true);
  const initial = new Uint8Array(await readFile(node.disk.initialPassphrasePath));
  expect(await opensWithKey(node.disk.imagePath, initial), `${name}: initial passphrase removed`).toBe(false);

  const certPem = readIfExists(node.paths.kubeletCertPath);
  const keyPem = readIfExists(node.paths.kubeletKeyPath);
  expect(certPem, `${name}: kubelet certificate`).toBeDefined();
  expect(keyPem, `${name}: kubelet key`).toBeDefined();
  const cert = new X509Certificate(certPem as string);
  expect(cert.subject).toContain(`CN=system:node:${name}`);
  expect(cert.publicKey.equals(createPublicKey(keyPem as string)), `${name}: key matches certificate`).toBe(
    true,
  );
  for (const p of [node.paths.kubeletCertPath, node.paths.kubeletKeyPath, node.paths.nodeStatePath])
    expect(statSync(p).mode & 0o777, `${name}: mode of ${p}`).toBe(0o600);

  const state = decodeNodeState(readIfExists(node.paths.nodeStatePath) ?? '');
  expect(state.role).toBe('Worker');
  expect(hex(state.measurementSalt)).toBe(hex(cluster.measurementSalt));
  expect(
    cluster.cp.joinedNodes.filter((n) => n.name === name),
    `${name}: joined exactly once`,
  ).toHaveLength(1);
  expectNoTempFiles(node);
}

/** The node never passed the node lock: PCR 15 zero, disk untouched (no token, initial key), nothing written. */
export async function expectPristine(node: FaultNode): Promise<void> {
  const name = node.name;
  expect(await pcr15(node), `${name}: PCR 15`).toBe('00'.repeat(32));
  const { token } = await diskFacts(node);
  expect(token, `${name}: LUKS2 token`).toBeUndefined();
  const initial = new Uint8Array(await readFile(node.disk.initialPassphrasePath));
  expect(
    await opensWithKey(node.disk.imagePath, initial),
    `${name}: still opens with the initial passphrase`,
  ).toBe(true);
  expect(filesUnder(node.paths.pkiDir), `${name}: pki files`).toEqual([]);
  expect(readIfExists(node.paths.kubeletCertPath), `${name}: kubelet certificate`).toBeUndefined();
  expect(readIfExists(node.paths.kubeletKeyPath), `${name}: kubelet key`).toBeUndefined();
  expect(readIfExists(node.paths.nodeStatePath), `${name}: node_state.json`).toBeUndefined();
  expectNoTempFiles(node);
}

/**
 * The node failed past the lock: PCR 15 holds the cluster ID, the LUKS2 token says "needs reset"
 * (diskIsInitialized false), and nothing after the failed step was written. `written` lists the
 * credentials the flow had completed before the failure (they must then be whole).
 */
export async function expectMarkedForReset(
  cluster: FaultCluster,
  node: FaultNode,
  written: { kubelet: boolean; nodeState: boolean },
): Promise<void> {
  const name = node.name;
  expect(await pcr15(node), `${name}: PCR 15 (locked)`).toBe(hex(expectedPcr15(await cluster.clusterId())));
  const { token } = await diskFacts(node);
  expect(token, `${name}: LUKS2 token present`).toBeDefined();
  expect(token?.diskIsInitialized, `${name}: LUKS2 token says needs reset`).toBe(false);
  const certPem = readIfExists(node.paths.kubeletCertPath);
  const keyPem = readIfExists(node.paths.kubeletKeyPath);
  if (written.kubelet) {
    const cert = new X509Certificate(certPem as string);
    expect(
      cert.publicKey.equals(createPublicKey(keyPem as string)),
      `${name}: whole kubelet credentials`,
    ).toBe(true);
  } else {
    expect(certPem, `${name}: kubelet certificate`).toBeUndefined();
    expect(keyPem, `${name}: kubelet key`).toBeUndefined();
  }
  const state = readIfExists(node.paths.nodeStatePath);
  if (written.nodeState) expect(decodeNodeState(state ?? '').role).toBe('Worker');
  else expect(state, `${name}: node_state.json`).toBeUndefined();
  expect(
    cluster.cp.joinedNodes.some((n) => n.name === name),
    `${name}: not joined`,
  ).toBe(false);
  expectNoTempFiles(node);
}

/**
 * Every secret of the cluster and its nodes — master secret and salt, measurement salt and secret,
 * each state-disk key and initial passphrase, kubelet keys written, bootstrap tokens issued —
 * appears in no captured log line in any encoding (the failure paths log the most).
 */
export async function expectNoSecretsInLogs(cluster: FaultCluster): Promise<number> {
  const measurementSecret = await new HkdfKms(cluster.masterSecret, cluster.masterSalt).getDataKey(
    MEASUREMENT_SECRET_KEY_ID,
    32,
  );
  const secrets: Secret[] = [
    { kind: 'master secret', value: cluster.masterSecret },
    { kind: 'master salt', value: cluster.masterSalt },
    { kind: 'measurement salt', value: cluster.measurementSalt },
    { kind: 'measurement secret', value: measurementSecret },
  ];
  for (const [id, t] of cluster.cp.tokens) {
    secrets.push({ kind: 'bootstrap token', value: Buffer.from(`${id}.${t.secret}`) });
    secrets.push({ kind: 'bootstrap token secret', value: Buffer.from(t.secret) });
  }
  for (const node of cluster.nodes) {
    const { uuid } = await diskFacts(node);
    secrets.push({ kind: `${node.name} state disk key`, value: await cluster.diskKey(uuid) });
    secrets.push({
      kind: `${node.name} initial passphrase`,
      value: await readFile(node.disk.initialPassphrasePath),
    });
    const keyPem = readIfExists(node.paths.kubeletKeyPath);
    if (keyPem !== undefined) secrets.push(...pemSecrets(`${node.name} kubelet key`, keyPem));
  }
  const hits = searchSecrets(
    [{ name: 'captured logs', data: Buffer.from(cluster.logs.lines.join('\n')) }],
    secrets,
  );
  expect(hits).toEqual([]);
  return secrets.length;
}
