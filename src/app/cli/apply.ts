/**
 * `confboot apply`: brings a freshly initialised cluster up through its Kubernetes API (the admin
 * kubeconfig `confboot init` wrote): the master-secret Secret and measurement salt, the join config,
 * the CRDs, the components ConfigMap and NodeVersion, the key-service TLS Secrets and the join-service
 * and key-service workloads (src/app/bringup). Idempotent: a second run changes nothing and says so.
 * Then prints the join receipt key's kid and thumbprint as read back through the API, the pins for
 * `confboot receipt verify`.
 */
import { readFile } from 'node:fs/promises';
import { parseComponentList } from '../../adapters/components/component-list.js';
import { messageOf } from '../../ports/errors.js';
import type { Component } from '../../ports/types.js';
import { type BringupTarget, bringUp, bringupTarget } from '../bringup/bring-up.js';
import { receiptKeyAfterBringUp, receiptKeyLines } from '../bringup/receipt-key.js';
import { DEFAULT_IMAGE } from '../manifests/common.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../program/args.js';
import { cloudNames } from '../registry/index.js';
import { parseMasterSecretFile } from './operator-inputs.js';

export const applyCommand: CommandSpec = {
  name: 'apply',
  summary:
    'Bring a cluster up through its Kubernetes API after init: secrets, join config, CRDs, components, NodeVersion, join and key service (idempotent; server-side apply).',
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: 'admin kubeconfig from confboot init',
      default: 'constellation-admin.conf',
    },
    cloud: {
      type: 'string',
      valueName: 'C',
      required: true,
      get description() {
        return `cloud provider: ${cloudNames().join(', ')}`;
      },
    },
    variant: {
      type: 'string',
      valueName: 'V',
      description: "attestation variant of the cluster's nodes (default: the cloud's first)",
    },
    'attestation-config': {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'the attestation config given to confboot init',
    },
    'master-secret-file': {
      type: 'string',
      valueName: 'F',
      default: 'constellation-mastersecret.json',
      description: 'JSON {"key","salt"} (base64) from confboot init',
    },
    'measurement-salt-file': {
      type: 'string',
      valueName: 'F',
      default: 'measurement-salt.bin',
      description: '32-byte measurement salt from confboot init',
    },
    components: {
      type: 'string',
      valueName: 'F',
      description: 'JSON list of Kubernetes components (as for confboot init); default none',
    },
    'kubernetes-version': {
      type: 'string',
      valueName: 'V',
      default: 'v1.31.1',
      description: 'Kubernetes version recorded in the NodeVersion',
    },
    image: { type: 'string', valueName: 'IMG', default: DEFAULT_IMAGE, description: 'container image' },
    'dry-run': { type: 'boolean', description: 'server-side dry run: validate every object, store nothing' },
    'ready-timeout-seconds': {
      type: 'string',
      valueName: 'S',
      default: '300',
      description: 'bound on waiting for the workloads to be ready',
    },
  },
  epilog: [
    "Prints the join receipt key's kid and RFC 7638 SHA-256 thumbprint (read back through the API) for",
    'confboot receipt verify --kid / --jwks-sha256.',
    'Exit codes: 0 applied (or nothing to change), 1 an object failed (named), 2 usage or input error.',
  ].join('\n'),
};

/** Runs `confboot apply`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseCommand(argv, applyCommand);
    if (v === undefined) return 0;
    const progress = (line: string) => process.stderr.write(`apply: ${line}\n`);
    let target: BringupTarget;
    try {
      target = bringupTarget(String(v.cloud), v.variant as string | undefined);
    } catch (err) {
      throw new UsageError(messageOf(err));
    }
    const timeoutSeconds = Number(v['ready-timeout-seconds']);
    if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0)
      throw new UsageError('--ready-timeout-seconds must be > 0');
    const input = async (flag: string) => {
      try {
        return await readFile(String(v[flag]));
      } catch (err) {
        throw new UsageError(`reading --${flag}: ${messageOf(err)}`);
      }
    };
    const attestationConfig = (await input('attestation-config')).toString('utf8');
    try {
      JSON.parse(attestationConfig);
    } catch (err) {
      throw new UsageError(`--attestation-config is not JSON: ${messageOf(err)}`);
    }
    const { masterSecret, masterSalt } = parseMasterSecretFile(await input('master-secret-file'));
    const measurementSalt = new Uint8Array(await input('measurement-salt-file'));
    if (measurementSalt.length !== 32)
      throw new UsageError('--measurement-salt-file must hold exactly 32 bytes');
    let components: Component[] = [];
    if (v.components !== undefined) {
      try {
        components = parseComponentList(
          (await input('components')).toString('utf8'),
          `--components ${String(v.components)}`,
        );
      } catch (err) {
        throw new UsageError(messageOf(err));
      }
    }
    await bringUp({
      ...target,
      kubeconfig: String(v.kubeconfig),
      image: String(v.image),
      masterSecret,
      masterSalt,
      measurementSalt,
      attestationConfig,
      components,
      kubernetesVersion: String(v['kubernetes-version']),
      dryRun: v['dry-run'] === true,
      readyTimeoutInMs: timeoutSeconds * 1000,
      progress,
    });
    const pin = await receiptKeyAfterBringUp(String(v.kubeconfig), v['dry-run'] === true);
    if (pin === undefined) progress('No join receipt key in the cluster yet (dry run): no kid to print');
    else
      process.stdout.write(
        receiptKeyLines(pin)
          .map((line) => `${line}\n`)
          .join(''),
      );
    return 0;
  });
}
