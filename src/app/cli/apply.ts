/**
 * `confboot apply`: brings a freshly initialised cluster up through its Kubernetes API (the admin
 * kubeconfig `confboot init` wrote): the master-secret Secret and measurement salt, the join config,
 * the CRDs, the components ConfigMap and NodeVersion, the key-service TLS Secrets and the join-service
 * and key-service workloads (src/app/bringup). Idempotent: a second run changes nothing and says so.
 * Then prints the join receipt key's kid and thumbprint as read back through the API, the pins for
 * `confboot receipt verify`.
 */
import { readFile } from 'node:fs/promises';
import { messageOf } from '../../ports/errors.js';
import { type BringupTarget, bringUp, bringupTarget, checkCloudApiEndpoint } from '../bringup/bring-up.js';
import { receiptKeyAfterBringUp, receiptKeyLines } from '../bringup/receipt-key.js';
import { DEFAULT_IMAGE } from '../manifests/common.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import {
  attestationConfigOption,
  cloudOption,
  DEPLOY_CLOUD_API_ENDPOINT_OPTION,
  OUTPUT_OPTION,
  variantOption,
} from '../program/shared-options.js';
import { parseMasterSecretFile, readComponents, readyTimeoutOption } from './operator-inputs.js';

export const applyCommand = defineCommand({
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
    cloud: cloudOption({ required: true }),
    variant: variantOption({
      required: false,
      what: "attestation variant of the cluster's nodes",
      note: " (default: the cloud's first)",
    }),
    'attestation-config': attestationConfigOption({
      required: true,
      note: ': the one given to confboot init',
    }),
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
    'cloud-api-endpoint': DEPLOY_CLOUD_API_ENDPOINT_OPTION,
    'dry-run': { type: 'boolean', description: 'server-side dry run: validate every object, store nothing' },
    'ready-timeout': readyTimeoutOption('the workloads to be ready'),
    output: OUTPUT_OPTION,
  },
  epilog: [
    "Prints the join receipt key's kid and RFC 7638 SHA-256 thumbprint (read back through the API) for",
    'confboot receipt verify --kid / --jwks-sha256.',
  ].join('\n'),
  exitCodes: { 0: 'applied (or nothing to change)', 1: 'an object failed (named)' },
});

/** Runs `confboot apply`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, applyCommand);
    if (v === undefined) return 0;
    const progress = (line: string) => process.stderr.write(`apply: ${line}\n`);
    let target: BringupTarget;
    try {
      target = bringupTarget(v.cloud, v.variant);
      checkCloudApiEndpoint(target.cloud, v['cloud-api-endpoint']);
    } catch (err) {
      throw new UsageError(messageOf(err));
    }
    const input = async (flag: string, path: string) => {
      try {
        return await readFile(path);
      } catch (err) {
        throw new UsageError(`reading --${flag}: ${messageOf(err)}`);
      }
    };
    const attestationConfig = (await input('attestation-config', v['attestation-config'])).toString('utf8');
    try {
      JSON.parse(attestationConfig);
    } catch (err) {
      throw new UsageError(`--attestation-config is not JSON: ${messageOf(err)}`);
    }
    const { masterSecret, masterSalt } = parseMasterSecretFile(
      await input('master-secret-file', v['master-secret-file']),
    );
    const measurementSalt = new Uint8Array(await input('measurement-salt-file', v['measurement-salt-file']));
    if (measurementSalt.length !== 32)
      throw new UsageError('--measurement-salt-file must hold exactly 32 bytes');
    const components = await readComponents(v.components);
    await bringUp({
      ...target,
      kubeconfig: v.kubeconfig,
      image: v.image,
      ...(v['cloud-api-endpoint'] === undefined ? {} : { cloudApiEndpoint: v['cloud-api-endpoint'] }),
      masterSecret,
      masterSalt,
      measurementSalt,
      attestationConfig,
      components,
      kubernetesVersion: v['kubernetes-version'],
      dryRun: v['dry-run'],
      readyTimeoutInMs: v['ready-timeout'],
      progress,
    });
    const pin = await receiptKeyAfterBringUp(v.kubeconfig, v['dry-run']);
    if (pin === undefined) progress('No join receipt key in the cluster yet (dry run): no kid to print');
    const result = {
      cloud: target.cloud,
      variant: target.variant,
      dryRun: v['dry-run'],
      receiptKey: pin ?? null,
    };
    return printResult(v.output, 'apply', 0, result, () =>
      pin === undefined ? '' : receiptKeyLines(pin).join('\n'),
    );
  });
}

/** The command's option table. */
export const commandSpecs = [applyCommand];
