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
import type { Variant } from '../../ports/variant.js';
import type { JoinServiceCsp } from '../join-service/production.js';
import { DEFAULT_IMAGE, type DeployTarget, NAMESPACE } from '../manifests/common.js';
import { receiptKeySecret } from '../manifests/join-service.js';
import { parseImageReference, renderKustomizeTree } from '../manifests/kustomize.js';
import { deployTargets, deployVariants, renderManifests } from '../manifests/manifests.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../program/args.js';
import { cloudNames, isCloud } from '../registry/index.js';
import { checkMeasurementPolicy } from '../registry/policy-guard.js';

const targetList = () =>
  cloudNames()
    .map((c) => `${c}: ${deployVariants(c).join(', ')}`)
    .join('; ');

/** Flags of `confboot manifests`. */
export const manifestsCommand: CommandSpec = {
  name: 'manifests',
  summary:
    'Render the Kubernetes manifests (join service, key service, NetworkPolicy, PodDisruptionBudgets, the CRDs and join-service RBAC) for a cloud and attestation variant, or a kustomize base and overlays.',
  options: {
    cloud: {
      type: 'string',
      valueName: 'C',
      get description() {
        return `cloud provider: ${cloudNames().join(', ')}`;
      },
    },
    variant: {
      type: 'string',
      valueName: 'V',
      description: "attestation variant of the cluster's nodes (default: the cloud's first)",
    },
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
    image: { type: 'string', valueName: 'IMG', default: DEFAULT_IMAGE, description: 'container image' },
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
    'tls-validity-days': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_TLS_VALIDITY_DAYS),
      description: 'with --tls-secrets: how long the certificates are valid',
    },
  },
  get epilog() {
    return `Clouds and their variants (the first is the default): ${targetList()}.\nBy default the join service reaches the key service over mutual TLS: create its Secrets once with\n  confboot manifests --tls-secrets | kubectl apply -f -\nand restart both services after renewing them (same command). The join service signs receipts with a key\nfrom a Secret; create it once with\n  confboot manifests --receipt-key-secret | kubectl apply -f -\n(confboot apply creates both when they are missing.)\nWith --out, DIR/overlays/<cloud>-<variant> renders with kubectl kustomize (kustomize v2.0.3 or later); its\nattestation-config.json and measurement-salt.bin are --attestation-config and --measurement-salt-file when given.\nExit codes: 0 on success, 1 when writing fails or the attestation config is refused, 2 on bad flags.`;
  },
};

/** Flags that choose what the manifests hold, which --tls-secrets and --receipt-key-secret refuse. */
const TARGET_FLAGS = [
  'cloud',
  'variant',
  'all',
  'out',
  'plain-key-service',
  'attestation-config',
  'measurement-salt-file',
];

/** Reads `--attestation-config` and `--measurement-salt-file`; refuses a config the join service would refuse. */
async function clusterInputs(
  v: Record<string, unknown>,
  target: DeployTarget,
): Promise<{ attestationConfig?: string; measurementSalt?: Uint8Array }> {
  const read = async (flag: string): Promise<Buffer | undefined> => {
    const path = v[flag] as string | undefined;
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
  const v = parseCommand(argv, manifestsCommand, out);
  if (v === undefined) return 0;
  const image = v.image as string;
  try {
    parseImageReference(image);
  } catch (err) {
    throw new UsageError(`--image: ${messageOf(err)}`);
  }
  const dir = v.out as string | undefined;
  if (v['receipt-key-secret']) {
    const others = [...TARGET_FLAGS, 'tls-secrets'].filter((f) => v[f] !== undefined);
    if (others.length > 0)
      throw new UsageError(`--receipt-key-secret prints only the Secret: leave out --${others.join(', --')}`);
    const doc = new Document(receiptKeySecret(generateReceiptKeyPem()));
    doc.commentBefore =
      ' The join service\'s receipt key (docs/attestation-config.md, "Join receipts"): create once;\n every replica and restart signs with it, so one JWKS verifies every receipt.';
    out.write(doc.toString({ lineWidth: 0 }));
    return 0;
  }
  if (v['tls-secrets']) {
    const others = TARGET_FLAGS.filter((f) => v[f] !== undefined);
    if (others.length > 0)
      throw new UsageError(`--tls-secrets prints only the Secrets: leave out --${others.join(', --')}`);
    const days = v['tls-validity-days'] as string;
    if (!/^[1-9]\d{0,4}$/.test(days))
      throw new UsageError(`--tls-validity-days: want a whole number of days ≥ 1, got "${days}"`);
    const tls = await createKeyServiceTls({
      serverNames: keyServiceDnsNames(NAMESPACE),
      validityDays: Number(days),
    });
    out.write(renderKeyServiceTlsSecrets(tls, NAMESPACE));
    return 0;
  }
  const keyServiceTls = v['plain-key-service'] !== true;
  let targets: DeployTarget[];
  if (v.all) {
    if (v.cloud !== undefined || v.variant !== undefined)
      throw new UsageError('--all renders every cloud and variant: leave out --cloud and --variant');
    if (dir === undefined) throw new UsageError('--all needs --out DIR');
    const own = ['attestation-config', 'measurement-salt-file'].filter((f) => v[f] !== undefined);
    if (own.length > 0) throw new UsageError(`--${own.join(', --')} belongs to one cluster: leave out --all`);
    targets = deployTargets();
  } else {
    const cloud = v.cloud as string | undefined;
    if (cloud === undefined) throw new UsageError('missing --cloud (or --all)');
    if (!isCloud(cloud))
      throw new UsageError(`--cloud: want one of ${cloudNames().join(', ')}, got "${cloud}"`);
    const variants = deployVariants(cloud as JoinServiceCsp);
    const variant = (v.variant as string | undefined) ?? variants[0];
    if (variant === undefined || !(variants as string[]).includes(variant))
      throw new UsageError(`--variant: cloud ${cloud} has ${variants.join(', ')}, got "${variant}"`);
    targets = [{ cloud: cloud as JoinServiceCsp, variant: variant as Variant }];
  }
  const own = await clusterInputs(v, targets[0] as DeployTarget);
  if (dir === undefined) {
    out.write(renderManifests({ ...(targets[0] as DeployTarget), image, keyServiceTls, ...own }));
    return 0;
  }
  for (const file of renderKustomizeTree({ targets, image, keyServiceTls, ...own })) {
    const path = join(dir, file.path);
    await writeAtomically(path, file.content);
    process.stderr.write(`wrote ${path}\n`);
  }
  return 0;
}

/** `confboot manifests …`. */
export function run(argv: string[]): Promise<number> {
  return runCommand(() => runManifests(argv));
}
