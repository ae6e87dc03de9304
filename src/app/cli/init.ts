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
import { messageOf } from '../../ports/errors.js';
import { type BringupTarget, bringUp, bringupTarget, checkCloudApiEndpoint } from '../bringup/bring-up.js';
import { receiptKeyAfterBringUp, receiptKeyLines } from '../bringup/receipt-key.js';
import { DEFAULT_IMAGE } from '../manifests/common.js';
import { initCluster } from '../operator/init-cluster.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import {
  attestationConfigOption,
  cloudOption,
  DEPLOY_CLOUD_API_ENDPOINT_OPTION,
  OUTPUT_OPTION,
} from '../program/shared-options.js';
import {
  AK_TRUST_OPTIONS,
  akTrustSettings,
  allowWeakPolicyOption,
  operatorValidator,
  parseMasterSecretFile,
  readComponents,
  readyTimeoutOption,
  secretVariantOption,
  timeoutOption,
} from './operator-inputs.js';
import {
  checkSplitSecret,
  parseRecoveryShareFlags,
  RECOVERY_SHARE_OPTIONS,
  writeRecoveryShareFiles,
} from './recovery-share-files.js';

export const initCommand = defineCommand({
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
    'attestation-config': attestationConfigOption({ required: true }),
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
    timeout: timeoutOption('the whole init', '15m'),
    ...RECOVERY_SHARE_OPTIONS,
    'no-apply': {
      type: 'boolean',
      description:
        'stop after init: do not bring the cluster up through its Kubernetes API (run confboot apply later)',
    },
    cloud: cloudOption({
      required: false,
      what: "cloud of the bring-up's manifests",
      note: ' (default: the cloud of --variant)',
    }),
    image: {
      type: 'string',
      valueName: 'IMG',
      default: DEFAULT_IMAGE,
      description: 'container image of the join and key service the bring-up deploys',
    },
    'cloud-api-endpoint': DEPLOY_CLOUD_API_ENDPOINT_OPTION,
    'ready-timeout': readyTimeoutOption('the join and key service to be ready after the bring-up'),
    output: OUTPUT_OPTION,
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
  ].join('\n'),
  exitCodes: { 0: 'initialised (and brought up)' },
});

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
    const v = parseOptions(argv, initCommand);
    if (v === undefined) return 0;
    const progress = (line: string) => process.stderr.write(`init: ${line}\n`);
    const { variant } = v;
    // Checked before any file is created or anything is sent: a split that cannot be made or
    // recovered is a usage error, not a cluster without its shares.
    const recoveryShares = parseRecoveryShareFlags(v);
    // The master secret goes only to a node whose attestation proves its image.
    const validator = await operatorValidator(
      variant,
      v['attestation-config'],
      v['allow-weak-measurement-policy'],
      'init',
      akTrustSettings(v),
    );

    const masterFile = await readOrCreate(
      v['master-secret-file'],
      () =>
        new TextEncoder().encode(
          `${JSON.stringify({ key: randomBytes(32).toString('base64'), salt: randomBytes(32).toString('base64') }, null, 2)}\n`,
        ),
      (b) => b,
    );
    const { masterSecret, masterSalt } = parseMasterSecretFile(masterFile);
    if (recoveryShares.total >= 2) checkSplitSecret(masterSecret);
    const measurementSalt = await readOrCreate(
      v['measurement-salt-file'],
      () => randomBytes(32),
      (b) => new Uint8Array(b),
    );
    if (measurementSalt.length !== 32)
      throw new UsageError('--measurement-salt-file must hold exactly 32 bytes');
    const initSecret = new Uint8Array(await readFile(v['init-secret-file']));
    const components = await readComponents(v.components);

    let target: BringupTarget | undefined;
    if (!v['no-apply'])
      try {
        target = bringupTarget(v.cloud, variant);
        checkCloudApiEndpoint(target.cloud, v['cloud-api-endpoint']);
      } catch (err) {
        throw new UsageError(`bring-up: ${messageOf(err)} (or pass --no-apply)`);
      }

    const outcome = await initCluster({
      endpoint: v.endpoint,
      validators: [validator],
      masterSecret,
      masterSalt,
      measurementSalt,
      initSecret,
      clusterName: v['cluster-name'],
      kubernetesVersion: v['kubernetes-version'],
      apiserverCertSans: v['apiserver-cert-san'] ?? [],
      serviceCidr: v['service-cidr'],
      components,
      timeoutInMs: v.timeout,
      progress,
    });
    if (!outcome.ok) {
      if (v.output === 'json')
        printResult(
          'json',
          'init',
          1,
          { error: outcome.error, mismatches: outcome.mismatches ?? [] },
          () => '',
        );
      process.stderr.write(`init: failed: ${outcome.error}\n`);
      for (const m of outcome.mismatches ?? []) process.stderr.write(`init:   ${m}\n`);
      if (outcome.logs) process.stderr.write(`init: log lines from the node:\n${outcome.logs}\n`);
      return 1;
    }
    await writeFile(v.kubeconfig, outcome.kubeconfig, { mode: 0o600, flag: 'wx' });
    progress(`Wrote the admin kubeconfig to ${v.kubeconfig}`);
    const clusterId = Buffer.from(outcome.clusterId).toString('hex');
    if (v.output === 'table') process.stdout.write(`Cluster ID: ${clusterId}\n`);
    let recoveryShareFiles: string[] = [];
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
      recoveryShareFiles = paths;
    }
    const result = { clusterId, kubeconfig: v.kubeconfig, recoveryShareFiles };
    if (target === undefined)
      return v.output === 'json' ? printResult('json', 'init', 0, result, () => '') : 0;
    progress('Bringing the cluster up through its Kubernetes API');
    try {
      await bringUp({
        ...target,
        kubeconfig: v.kubeconfig,
        image: v.image,
        ...(v['cloud-api-endpoint'] === undefined ? {} : { cloudApiEndpoint: v['cloud-api-endpoint'] }),
        masterSecret,
        masterSalt,
        measurementSalt,
        attestationConfig: await readFile(v['attestation-config'], 'utf8'),
        components,
        kubernetesVersion: v['kubernetes-version'],
        readyTimeoutInMs: v['ready-timeout'],
        progress: (line) => progress(`apply: ${line}`),
      });
    } catch (err) {
      const rerun = `confboot apply --cloud ${target.cloud} --variant ${target.variant} --kubeconfig ${v.kubeconfig} --attestation-config ${v['attestation-config']} --master-secret-file ${v['master-secret-file']} --measurement-salt-file ${v['measurement-salt-file']}${v.components === undefined ? '' : ` --components ${v.components}`}`;
      if (v.output === 'json')
        return printResult('json', 'init', 1, { ...result, bringUpFailed: messageOf(err), rerun }, () => '');
      process.stderr.write(`init: bring-up failed: ${messageOf(err)}\n`);
      process.stderr.write(`init: the cluster is initialised; once the cause is fixed run: ${rerun}\n`);
      return 1;
    }
    // The pins for `confboot receipt verify`: the key Secret as the CA-verified API returns it.
    const pin = await receiptKeyAfterBringUp(v.kubeconfig, false);
    return printResult(v.output, 'init', 0, { ...result, receiptKey: pin ?? null }, () =>
      pin === undefined ? '' : receiptKeyLines(pin).join('\n'),
    );
  });
}

/** The command's option table. */
export const commandSpecs = [initCommand];
