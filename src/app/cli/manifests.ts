/**
 * `confboot manifests`: renders the Kubernetes manifests of a cluster for one cloud and attestation
 * variant (src/app/manifests/manifests.ts) to stdout, or writes them under a directory as a kustomize
 * base and overlay (src/app/manifests/kustomize.ts); `--all --out` writes the overlay of every cloud
 * and variant, which is how deploy/kubernetes/ is made. `--tls-secrets` prints the
 * Secrets for mutual TLS between the join service and the key service (src/adapters/pki/key-service-tls.ts).
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Document } from 'yaml';
import {
  createKeyServiceTls,
  DEFAULT_TLS_VALIDITY_DAYS,
  keyServiceDnsNames,
  renderKeyServiceTlsSecrets,
} from '../../adapters/pki/key-service-tls.js';
import { generateReceiptKeyPem } from '../../adapters/receipts/receipt-key.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import { messageOf } from '../../ports/errors.js';
import { DEFAULT_IMAGE, type DeployTarget, NAMESPACE } from '../manifests/common.js';
import { receiptKeySecret } from '../manifests/join-service.js';
import { parseImageReference, renderKustomizeTree } from '../manifests/kustomize.js';
import { deployTargets, deployVariants, renderManifests } from '../manifests/manifests.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, duration, type OptionValues, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import {
  cloudOption,
  DEPLOY_CLOUD_API_ENDPOINT_OPTION,
  OUTPUT_OPTION,
  parseClusterIdHex,
  variantOption,
} from '../program/shared-options.js';
import { cloudNames } from '../registry/index.js';
import { checkMeasurementPolicy } from '../registry/policy-guard.js';

const targetList = () =>
  cloudNames()
    .map((c) => `${c}: ${deployVariants(c).join(', ')}`)
    .join('; ');

/** Flags of `confboot manifests`. */
export const manifestsCommand = defineCommand({
  name: 'manifests',
  summary:
    'Render the Kubernetes manifests (join service, key service, NetworkPolicy, PodDisruptionBudgets, the CRDs and join-service RBAC) for a cloud and attestation variant, or a kustomize base and overlays.',
  options: {
    cloud: cloudOption({ required: false }),
    variant: variantOption({
      required: false,
      what: "attestation variant of the cluster's nodes",
      note: " (default: the cloud's first)",
    }),
    all: { type: 'boolean', description: 'render every cloud and variant (needs --out)' },
    out: {
      type: 'string',
      valueName: 'DIR',
      description:
        'write a kustomize tree instead of printing to stdout: DIR/base and DIR/overlays/<cloud>-<variant> (kubectl apply -k)',
    },
    'attestation-config': {
      type: 'string',
      valueName: 'F',
      description:
        "the cluster's attestation config (JSON, as given to confboot init) instead of the template with zero measurements",
    },
    'measurement-salt-file': {
      type: 'string',
      valueName: 'F',
      description:
        'the 32-byte measurement salt confboot init wrote (measurement-salt.bin) instead of a placeholder',
    },
    'cloud-api-endpoint': DEPLOY_CLOUD_API_ENDPOINT_OPTION,
    'cluster-id': {
      type: 'string',
      valueName: 'HEX',
      description:
        'the cluster ID confboot init printed (64 hex digits) instead of an empty one; the node operator re-attests vTPM nodes with it',
      parse: parseClusterIdHex,
    },
    image: {
      type: 'string',
      valueName: 'IMG',
      default: DEFAULT_IMAGE,
      description: 'container image',
      parse: (raw: string) => {
        try {
          parseImageReference(raw);
        } catch (err) {
          throw new UsageError(`--image: ${messageOf(err)}`);
        }
        return raw;
      },
    },
    'plain-key-service': {
      type: 'boolean',
      description:
        'render the key service without mutual TLS: plain gRPC that hands keys to anyone who reaches it, kept out only by the NetworkPolicy',
    },
    'tls-secrets': {
      type: 'boolean',
      description:
        'instead: print the two Secrets mutual TLS needs (fresh CA, key-service and join-service certificates; private keys: pipe to kubectl apply -f -, do not commit)',
    },
    'receipt-key-secret': {
      type: 'boolean',
      description:
        'instead: print the Secret with a fresh join receipt key (a private key: pipe to kubectl apply -f - once, do not commit; applying it again replaces the key)',
    },
    'tls-validity': {
      type: 'string',
      valueName: 'DURATION',
      default: `${DEFAULT_TLS_VALIDITY_DAYS}d`,
      aliases: ['tls-validity-days'],
      description:
        'with --tls-secrets: how long the certificates are valid, in whole days; a bare number counts days',
      parse: (raw: string, flag: string) => {
        const ms = duration('d', DAY_MS)(raw, flag);
        if (ms % DAY_MS !== 0) throw new UsageError(`--${flag}: want whole days, got "${raw}"`);
        return ms / DAY_MS;
      },
    },
    output: OUTPUT_OPTION,
  },
  get epilog() {
    return `Clouds and their variants (the first is the default): ${targetList()}.\nBy default the join service reaches the key service over mutual TLS: create its Secrets once with\n  confboot manifests --tls-secrets | kubectl apply -f -\nand restart both services after renewing them (same command). The join service signs receipts with a key\nfrom a Secret; create it once with\n  confboot manifests --receipt-key-secret | kubectl apply -f -\n(confboot apply creates both when they are missing.)\nWith --out, DIR/overlays/<cloud>-<variant> renders with kubectl kustomize (kustomize v2.0.3 or later); its\nattestation-config.json, measurement-salt.bin and cluster-id.txt are --attestation-config, --measurement-salt-file\nand --cluster-id when given.\n-o json prints {yaml} (or, with --out, {wrote: [paths]}) as the result.`;
  },
  exitCodes: { 1: 'writing failed or the attestation config is refused' },
});

const DAY_MS = 86_400_000;

type ManifestsValues = OptionValues<typeof manifestsCommand.options>;

/** Flags that choose what the manifests hold, which --tls-secrets and --receipt-key-secret refuse. */
const TARGET_FLAGS = [
  'cloud',
  'variant',
  'all',
  'out',
  'plain-key-service',
  'attestation-config',
  'measurement-salt-file',
  'cluster-id',
  'cloud-api-endpoint',
] as const;

/** The flags among `flags` that were given. */
function given(v: ManifestsValues, flags: readonly (keyof ManifestsValues)[]): string[] {
  return flags.filter((f) => v[f] !== undefined && v[f] !== false);
}

/** Reads `--attestation-config`, `--measurement-salt-file` and `--cluster-id`; refuses a config the join service would refuse. */
async function clusterInputs(
  v: ManifestsValues,
  target: DeployTarget,
): Promise<{
  attestationConfig?: string;
  measurementSalt?: Uint8Array;
  clusterId?: Uint8Array;
  cloudApiEndpoint?: string;
}> {
  const read = async (flag: 'attestation-config' | 'measurement-salt-file'): Promise<Buffer | undefined> => {
    const path = v[flag];
    if (path === undefined) return undefined;
    try {
      return await readFile(path);
    } catch (err) {
      throw new UsageError(
        `--${flag}: reading ${path}: ${(err as NodeJS.ErrnoException).code ?? messageOf(err)}`,
      );
    }
  };
  const config = (await read('attestation-config'))?.toString('utf8');
  if (config !== undefined) {
    parseAttestationConfig(config);
    checkMeasurementPolicy(target.variant, config, false);
  }
  const salt = await read('measurement-salt-file');
  if (salt !== undefined && salt.length !== 32)
    throw new UsageError(`--measurement-salt-file must hold exactly 32 bytes, not ${salt.length}`);
  return {
    ...(config === undefined ? {} : { attestationConfig: config }),
    ...(salt === undefined ? {} : { measurementSalt: new Uint8Array(salt) }),
    ...(v['cluster-id'] === undefined ? {} : { clusterId: v['cluster-id'] }),
    ...(v['cloud-api-endpoint'] === undefined ? {} : { cloudApiEndpoint: v['cloud-api-endpoint'] }),
  };
}

/** Writes `content` to `path` through a temporary file, so a reader never sees half a file. */
async function writeAtomically(path: string, content: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, content);
  await rename(tmp, path);
}

/** Runs `confboot manifests` with `argv`; resolves to the exit code. */
export async function runManifests(
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
): Promise<number> {
  const v = parseOptions(argv, manifestsCommand, out);
  if (v === undefined) return 0;
  const { image } = v;
  const dir = v.out;
  const print = (command: string, yaml: string) =>
    printResult(v.output, command, 0, { yaml }, (r) => r.yaml, out);
  if (v['receipt-key-secret']) {
    const others = given(v, [...TARGET_FLAGS, 'tls-secrets']);
    if (others.length > 0)
      throw new UsageError(`--receipt-key-secret prints only the Secret: leave out --${others.join(', --')}`);
    const doc = new Document(receiptKeySecret(generateReceiptKeyPem()));
    doc.commentBefore =
      ' The join service\'s receipt key (docs/attestation-config.md, "Join receipts"): create once;\n every replica and restart signs with it, so one JWKS verifies every receipt.';
    return print('manifests', doc.toString({ lineWidth: 0 }));
  }
  if (v['tls-secrets']) {
    const others = given(v, TARGET_FLAGS);
    if (others.length > 0)
      throw new UsageError(`--tls-secrets prints only the Secrets: leave out --${others.join(', --')}`);
    const tls = await createKeyServiceTls({
      serverNames: keyServiceDnsNames(NAMESPACE),
      validityDays: v['tls-validity'],
    });
    return print('manifests', renderKeyServiceTlsSecrets(tls, NAMESPACE));
  }
  const keyServiceTls = !v['plain-key-service'];
  let targets: DeployTarget[];
  if (v.all) {
    if (v.cloud !== undefined || v.variant !== undefined)
      throw new UsageError('--all renders every cloud and variant: leave out --cloud and --variant');
    if (dir === undefined) throw new UsageError('--all needs --out DIR');
    const own = given(v, ['attestation-config', 'measurement-salt-file', 'cluster-id', 'cloud-api-endpoint']);
    if (own.length > 0) throw new UsageError(`--${own.join(', --')} belongs to one cluster: leave out --all`);
    targets = deployTargets();
  } else {
    const { cloud } = v;
    if (cloud === undefined) throw new UsageError('missing --cloud (or --all)');
    const variants = deployVariants(cloud);
    const variant = v.variant ?? variants[0];
    if (variant === undefined || !variants.includes(variant))
      throw new UsageError(`--variant: cloud ${cloud} has ${variants.join(', ')}, got "${variant}"`);
    targets = [{ cloud, variant }];
  }
  const [first] = targets;
  if (first === undefined) throw new UsageError('no cloud and variant to render');
  const own = await clusterInputs(v, first);
  if (dir === undefined)
    return print('manifests', renderManifests({ ...first, image, keyServiceTls, ...own }));
  const wrote: string[] = [];
  for (const file of renderKustomizeTree({ targets, image, keyServiceTls, ...own })) {
    const path = join(dir, file.path);
    await writeAtomically(path, file.content);
    if (v.output === 'table') process.stderr.write(`wrote ${path}\n`);
    wrote.push(path);
  }
  return printResult(v.output, 'manifests', 0, { wrote }, () => '', out);
}

/** `confboot manifests …`. */
export function run(argv: string[]): Promise<number> {
  return runCommand(() => runManifests(argv));
}

/** The command's option table. */
export const commandSpecs = [manifestsCommand];
