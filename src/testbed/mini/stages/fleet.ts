/**
 * Stage `fleet`: provisions every node's TPM (EK with a certificate from swtpm_localca, AK
 * persisted) and registers the AKs with the metadata server before any VM boots, each with the
 * VM's reserved address (the join service accepts an AK only from its VM's address); then boots
 * every node with the order to run `confboot bootstrapper`.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { MiniCluster } from '../context.js';
import type { BootstrapConfig } from '../guest/protocol.js';
import { provisionTpm } from '../provision.js';
import { type MiniNodeSpec, NODE_CMDLINE, TAMPERED_CMDLINE } from '../types.js';

/** Provisions the TPMs and publishes the identities. */
export async function provisionStage(c: MiniCluster): Promise<void> {
  c.progress(`provisioning ${c.nodes.length} TPMs (EK certificate from swtpm_localca, AK persisted)`);
  await Promise.all(
    c.nodes.map(async (n) => {
      const p = await provisionTpm(join(c.nodeDir(n.name), 'tpm'));
      c.identities[n.name] = {
        ip: c.slots.get(n.name)?.ip ?? '',
        attestationKeyPublic: Buffer.from(p.akPub).toString('base64'),
        ekCertificate: Buffer.from(p.ekCertificate).toString('base64'),
      };
    }),
  );
  await writeFile(c.identitiesFile, JSON.stringify(c.identities));
}

/** hostname → the VM's reserved address and registered AK (the join service's `--qemu-ak-registry`). */
export function akRegistry(c: MiniCluster): Record<string, { ip: string; attestationKeyPublic: string }> {
  return Object.fromEntries(
    Object.entries(c.identities).map(([n, i]) => [
      n,
      { ip: i.ip, attestationKeyPublic: i.attestationKeyPublic },
    ]),
  );
}

/** The order to run the bootstrapper (control planes also get the join service's policy). */
export function bootstrapConfig(c: MiniCluster, n: MiniNodeSpec, evidence = true): BootstrapConfig {
  return {
    step: 'bootstrap',
    role: n.role,
    ...(evidence ? { evidenceNonce: randomBytes(32).toString('hex') } : {}),
    metadataUrl: c.metadataUrl,
    stateDisk: '/dev/vda',
    ...(n.role === 'control-plane'
      ? { attestationConfig: c.expected.attestationConfig, akRegistry: akRegistry(c) }
      : {}),
  };
}

/** Per-node additions to the boot order (e.g. a marker, staying up). */
export type BootExtras = (n: MiniNodeSpec) => Partial<BootstrapConfig>;

/** Boots every node (a tampered one with another kernel command line). */
export async function bootStage(c: MiniCluster, extras?: BootExtras): Promise<void> {
  c.t0 = Date.now();
  for (const n of c.nodes) await bootNode(c, n, { ...bootstrapConfig(c, n), ...extras?.(n) });
}

/** Boots node `n` with `config` (a tampered one with another kernel command line) and records its result. */
export async function bootNode(c: MiniCluster, n: MiniNodeSpec, config: BootstrapConfig): Promise<void> {
  const slot = c.slots.get(n.name);
  c.results.set(n.name, {
    name: n.name,
    role: n.role,
    boot: n.boot,
    ip: slot?.ip ?? '',
    stage: 'booting',
    accepted: false,
    reason: '',
    mismatches: [],
    consoleLog: join(c.nodeDir(n.name), 'console.log'),
    seconds: 0,
  });
  c.say(
    n.name,
    'booting',
    `(${n.boot === 'tampered' ? 'tampered: extra kernel parameter' : 'good'}, ${c.accel})`,
  );
  await c.startNode(n.name, {
    cmdline: n.boot === 'good' ? NODE_CMDLINE : TAMPERED_CMDLINE,
    config,
    cpus: n.role === 'control-plane' ? (c.options.controlPlaneCpus ?? 1) : 1,
  });
}
