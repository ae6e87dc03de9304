/**
 * `confboot init`: the operator side of the init flow. Verifies the first node's
 * attestation over attested TLS before sending anything, then sends the InitRequest — master secret
 * and salt inside `kms_uri` as upstream, a fresh measurement salt, the init secret and the cluster
 * name — shows progress, writes the admin kubeconfig and prints the cluster ID; after the bring-up
 * it prints the join receipt key's kid and thumbprint, read through the kubeconfig's CA-verified API.
 * On failure it prints the log lines the node streamed back.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { parseComponentList } from '../../adapters/components/component-list.js';
import { messageOf } from '../../ports/errors.js';
import type { Component } from '../../ports/types.js';
import { type BringupTarget, bringUp, bringupTarget } from '../bringup/bring-up.js';
import { receiptKeyAfterBringUp, receiptKeyLines } from '../bringup/receipt-key.js';
import { DEFAULT_IMAGE } from '../manifests/common.js';
import { initCluster } from '../operator/init-cluster.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../program/args.js';
import { cloudNames } from '../registry/index.js';
import {
  AK_TRUST_OPTIONS,
  akTrustSettings,
  allowWeakPolicyOption,
  operatorValidator,
  parseMasterSecretFile,
  secretVariantOption,
  timeoutFlagMs,
  variantFlag,
} from './operator-inputs.js';
import {
  checkSplitSecret,
  parseRecoveryShareFlags,
  RECOVERY_SHARE_OPTIONS,
  writeRecoveryShareFiles,
} from './recovery-share-files.js';

export const initCommand: CommandSpec = {
  name: 'init',
  summary:
    "Initialise a cluster on its first control-plane node: verify the node's attestation, send the master secret, write the kubeconfig.",
  options: {
    endpoint: {
      type: 'string',
      valueName: 'HOST:PORT',
      description: "the first node's init server",
      required: true,
    },
    'attestation-config': {
      type: 'string',
      valueName: 'F',
      description: 'expected measurements ({"measurements": {...}} or a bare map)',
      required: true,
    },
    variant: secretVariantOption(),
    ...AK_TRUST_OPTIONS,
    'init-secret-file': {
      type: 'string',
      valueName: 'F',
      description: 'the init secret whose bcrypt hash the node reads from metadata',
      required: true,
    },
    'master-secret-file': {
      type: 'string',
      valueName: 'F',
      description: 'JSON {"key","salt"} (base64); created with fresh random values if missing',
      default: 'constellation-mastersecret.json',
    },
    components: {
      type: 'string',
      valueName: 'F',
      description:
        'JSON list of Kubernetes components [{"url","hash":"sha256:…","install_path","extract"}]: the node downloads each and refuses any whose hash differs before kubeadm runs (default: none)',
    },
    'measurement-salt-file': {
      type: 'string',
      valueName: 'F',
      description: '32-byte measurement salt; created with fresh random bytes if missing',
      default: 'measurement-salt.bin',
    },
    'cluster-name': {
      type: 'string',
      valueName: 'NAME',
      description: 'cluster name',
      default: 'constellation',
    },
    'kubernetes-version': {
      type: 'string',
      valueName: 'V',
      description: 'Kubernetes version',
      default: 'v1.31.1',
    },
    'apiserver-cert-san': {
      type: 'string',
      multiple: true,
      valueName: 'SAN',
      description: 'extra API server SAN',
    },
    'service-cidr': {
      type: 'string',
      valueName: 'CIDR',
      description: 'service CIDR',
      default: '10.96.0.0/12',
    },
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: 'where to write the admin kubeconfig (must not exist)',
      default: 'constellation-admin.conf',
    },
    'allow-weak-measurement-policy': allowWeakPolicyOption('the master secret'),
    'timeout-seconds': {
      type: 'string',
      valueName: 'N',
      description: 'bound on the whole init',
      default: '900',
    },
    ...RECOVERY_SHARE_OPTIONS,
    'no-apply': {
      type: 'boolean',
      description:
        'stop after init: do not bring the cluster up through its Kubernetes API (run confboot apply later)',
    },
    cloud: {
      type: 'string',
      valueName: 'C',
      get description() {
        return `cloud of the bring-up's manifests: ${cloudNames().join(', ')} (default: the cloud of --variant)`;
      },
    },
    image: {
      type: 'string',
      valueName: 'IMG',
      default: DEFAULT_IMAGE,
      description: 'container image of the join and key service the bring-up deploys',
    },
    'ready-timeout-seconds': {
      type: 'string',
      valueName: 'S',
      default: '300',
      description: 'bound on waiting for the join and key service to be ready after the bring-up',
    },
  },
  epilog: [
    "The variant decides how the node's attestation key is trusted, as in the join service: for qemu-vtpm the",
    "key must be the one --qemu-ak-registry registers for the node's address (without a registry init refuses",
    'to run, exit 2, unless --trust-ak-as-carried accepts any key: INSECURE).',
    'After the node is initialised and the kubeconfig written, init runs the bring-up of confboot apply',
    'through that kubeconfig (secrets, join config, CRDs, components, NodeVersion, join and key service),',
    'unless --no-apply. A failed bring-up leaves the cluster initialised; re-run confboot apply.',
    "Then it prints the join receipt key's kid and RFC 7638 SHA-256 thumbprint, the pins for",
    'confboot receipt verify --kid / --jwks-sha256.',
    'Exit codes: 0 initialised (and brought up), 1 refused or failed, 2 usage or input error.',
  ].join('\n'),
};

async function readOrCreate(
  path: string,
  make: () => Uint8Array,
  parse: (b: Buffer) => Uint8Array,
): Promise<Uint8Array> {
  try {
    return parse(await readFile(path));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const value = make();
    await writeFile(path, value, { mode: 0o600, flag: 'wx' });
    return parse(Buffer.from(value));
  }
}

/** Runs `confboot init`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseCommand(argv, initCommand);
    if (v === undefined) return 0;
    const progress = (line: string) => process.stderr.write(`init: ${line}\n`);
    const variant = variantFlag(v.variant);
    const timeoutInMs = timeoutFlagMs(v['timeout-seconds']);
    // Checked before any file is created or anything is sent: a split that cannot be made or
    // recovered is a usage error, not a cluster without its shares.
    const recoveryShares = parseRecoveryShareFlags(v);
    // The master secret goes only to a node whose attestation proves its image.
    const validator = await operatorValidator(
      variant,
      String(v['attestation-config']),
      v['allow-weak-measurement-policy'] === true,
      'init',
      akTrustSettings(v),
    );

    const masterFile = await readOrCreate(
      String(v['master-secret-file']),
      () =>
        new TextEncoder().encode(
          `${JSON.stringify({ key: randomBytes(32).toString('base64'), salt: randomBytes(32).toString('base64') }, null, 2)}\n`,
        ),
      (b) => b,
    );
    const { masterSecret, masterSalt } = parseMasterSecretFile(masterFile);
    if (recoveryShares.total >= 2) checkSplitSecret(masterSecret);
    const measurementSalt = await readOrCreate(
      String(v['measurement-salt-file']),
      () => randomBytes(32),
      (b) => new Uint8Array(b),
    );
    if (measurementSalt.length !== 32)
      throw new UsageError('--measurement-salt-file must hold exactly 32 bytes');
    const initSecret = new Uint8Array(await readFile(String(v['init-secret-file'])));
    let components: Component[] = [];
    if (v.components !== undefined) {
      const file = String(v.components);
      try {
        components = parseComponentList(await readFile(file, 'utf8'), `--components ${file}`);
      } catch (err) {
        throw new UsageError(messageOf(err));
      }
    }

    const apply = v['no-apply'] !== true;
    let target: BringupTarget | undefined;
    let readyTimeoutInMs = 0;
    if (apply) {
      try {
        target = bringupTarget(v.cloud as string | undefined, variant);
      } catch (err) {
        throw new UsageError(`bring-up: ${messageOf(err)} (or pass --no-apply)`);
      }
      readyTimeoutInMs = Number(v['ready-timeout-seconds']) * 1000;
      if (!Number.isFinite(readyTimeoutInMs) || readyTimeoutInMs <= 0)
        throw new UsageError('--ready-timeout-seconds must be > 0');
    }

    const outcome = await initCluster({
      endpoint: String(v.endpoint),
      validators: [validator],
      masterSecret,
      masterSalt,
      measurementSalt,
      initSecret,
      clusterName: String(v['cluster-name']),
      kubernetesVersion: String(v['kubernetes-version']),
      apiserverCertSans: (v['apiserver-cert-san'] as string[] | undefined) ?? [],
      serviceCidr: String(v['service-cidr']),
      components,
      timeoutInMs,
      progress,
    });
    if (!outcome.ok) {
      process.stderr.write(`init: failed: ${outcome.error}\n`);
      for (const m of outcome.mismatches ?? []) process.stderr.write(`init:   ${m}\n`);
      if (outcome.logs) process.stderr.write(`init: log lines from the node:\n${outcome.logs}\n`);
      return 1;
    }
    await writeFile(String(v.kubeconfig), outcome.kubeconfig, { mode: 0o600, flag: 'wx' });
    progress(`Wrote the admin kubeconfig to ${String(v.kubeconfig)}`);
    process.stdout.write(`Cluster ID: ${Buffer.from(outcome.clusterId).toString('hex')}\n`);
    if (recoveryShares.total >= 2) {
      const paths = await writeRecoveryShareFiles({
        masterSecret,
        masterSalt,
        clusterId: outcome.clusterId,
        ...recoveryShares,
      });
      progress(
        `Wrote ${paths.length} recovery shares (any ${recoveryShares.threshold} recover the cluster): ${paths.join(', ')}`,
      );
    }
    if (target === undefined) return 0;
    progress('Bringing the cluster up through its Kubernetes API');
    try {
      await bringUp({
        ...target,
        kubeconfig: String(v.kubeconfig),
        image: String(v.image),
        masterSecret,
        masterSalt,
        measurementSalt,
        attestationConfig: await readFile(String(v['attestation-config']), 'utf8'),
        components,
        kubernetesVersion: String(v['kubernetes-version']),
        readyTimeoutInMs,
        progress: (line) => progress(`apply: ${line}`),
      });
    } catch (err) {
      process.stderr.write(`init: bring-up failed: ${messageOf(err)}\n`);
      process.stderr.write(
        `init: the cluster is initialised; once the cause is fixed run: confboot apply --cloud ${target.cloud} --variant ${target.variant} --kubeconfig ${String(v.kubeconfig)} --attestation-config ${String(v['attestation-config'])} --master-secret-file ${String(v['master-secret-file'])} --measurement-salt-file ${String(v['measurement-salt-file'])}${v.components === undefined ? '' : ` --components ${String(v.components)}`}\n`,
      );
      return 1;
    }
    // The pins for `confboot receipt verify`: the key Secret as the CA-verified API returns it.
    const pin = await receiptKeyAfterBringUp(String(v.kubeconfig), false);
    if (pin !== undefined)
      process.stdout.write(
        receiptKeyLines(pin)
          .map((line) => `${line}\n`)
          .join(''),
      );
    return 0;
  });
}
