/**
 * The bring-up as `confboot apply` and `confboot init` run it (app layer): from the cluster's own
 * values and the admin kubeconfig to applied objects. Resolves the cloud and variant of the
 * manifests, makes key-service TLS material (used only while its Secrets are missing), renders the
 * objects (objects.ts) and applies them (apply.ts). Secrets stay in memory; progress names objects only.
 */
import { loadKubeConfig } from '../../adapters/kubernetes/api.js';
import { createKeyServiceTls, keyServiceDnsNames } from '../../adapters/pki/key-service-tls.js';
import { generateReceiptKeyPem } from '../../adapters/receipts/receipt-key.js';
import type { Variant } from '../../ports/variant.js';
import type { JoinServiceCsp } from '../join-service/production.js';
import { NAMESPACE } from '../manifests/common.js';
import { deployVariants } from '../manifests/manifests.js';
import { cloudEntry, cloudNames, isCloud, isVariant, variantEntry } from '../registry/index.js';
import { type AppliedObject, applyObjects } from './apply.js';
import { checkPodNetwork } from './cni-check.js';
import { type BringupInput, bringupObjects } from './objects.js';

/** A cloud and variant the manifests are rendered for. */
export interface BringupTarget {
  cloud: JoinServiceCsp;
  variant: Variant;
}

/**
 * The deploy target of `cloud` (optional) and `variant` (optional): without a cloud, the one cloud
 * the variant is made for (qemu-vtpm: qemu, though OpenStack adopts it); without a variant, the
 * cloud's first. Throws a plain Error naming
 * the choices when they do not fit (callers turn it into a usage error).
 */
export function bringupTarget(cloud: string | undefined, variant: string | undefined): BringupTarget {
  let c = cloud;
  if (c === undefined) {
    const clouds = variant === undefined || !isVariant(variant) ? [] : variantEntry(variant).clouds;
    if (clouds.length !== 1)
      throw new Error(
        `give the cloud (${cloudNames().join(', ')}): ${variant === undefined ? 'no variant given' : `variant ${variant} runs on ${clouds.length === 0 ? 'no cloud' : clouds.join(', ')}`}`,
      );
    c = clouds[0] as string;
  }
  if (!isCloud(c)) throw new Error(`unknown cloud "${c}" (want one of ${cloudNames().join(', ')})`);
  const variants = deployVariants(c as JoinServiceCsp);
  const v = variant ?? variants[0];
  if (v === undefined || !variants.includes(v as Variant))
    throw new Error(`cloud ${c} has no variant "${v}" (want one of ${variants.join(', ')})`);
  return { cloud: c as JoinServiceCsp, variant: v as Variant };
}

/**
 * Throws a plain Error (callers turn it into a usage error) when `cloud`'s join service needs a
 * cloud API endpoint (OpenStack's Nova) and `endpoint` is not given: it would not start.
 */
export function checkCloudApiEndpoint(cloud: string, endpoint: string | undefined): void {
  const needs = isCloud(cloud) ? cloudEntry(cloud).joinServiceApiEndpoint : undefined;
  if (needs !== undefined && endpoint === undefined)
    throw new Error(`the join service on ${cloud} needs --cloud-api-endpoint: ${needs}`);
}

/** What {@link bringUp} needs: the cluster's own values (objects.ts) and how to apply them. */
export interface BringUpRequest
  extends Omit<BringupInput, 'tlsMaterial' | 'keyServiceTls' | 'receiptKeyPem'>,
    BringupTarget {
  /** Path of the admin kubeconfig `confboot init` wrote. */
  kubeconfig: string;
  dryRun?: boolean;
  readyTimeoutInMs: number;
  /** One line per object and wait (never secret content). */
  progress: (line: string) => void;
}

/** Applies every bring-up object through `kubeconfig`; rejects naming the object that failed. */
export async function bringUp(r: BringUpRequest): Promise<AppliedObject[]> {
  const kc = loadKubeConfig(r.kubeconfig);
  const { kubeconfig: _k, dryRun: _d, readyTimeoutInMs: _t, progress: _p, ...input } = r;
  const objects = bringupObjects({
    ...input,
    // Used only when the Secrets are missing: a re-run keeps the cluster's certificates.
    tlsMaterial: await createKeyServiceTls({ serverNames: keyServiceDnsNames(NAMESPACE) }),
    receiptKeyPem: generateReceiptKeyPem(),
  });
  // The join and key service need the pod network: say so now rather than time out later.
  await checkPodNetwork(kc);
  r.progress(
    `Applying ${objects.length} objects for ${r.cloud}/${r.variant} to ${kc.getCurrentCluster()?.server}${r.dryRun ? ' (dry run)' : ''}`,
  );
  return applyObjects(kc, objects, {
    dryRun: r.dryRun === true,
    progress: r.progress,
    readyTimeoutInMs: r.readyTimeoutInMs,
  });
}
