/**
 * The join receipt key as the cluster holds it (app layer): Secret
 * `kube-system/join-service-receipt-key` (`key.pem`), which the bring-up creates once and every
 * join-service replica mounts, read through the admin kubeconfig, i.e. over the Kubernetes API whose
 * CA that kubeconfig pins (and which `confboot init` received over the attested init session). The
 * private key stays in memory only long enough to derive its public JWK; what leaves is the JWKS and
 * the pins a relying party gives `confboot receipt verify`. Used by `confboot init`, `apply` and
 * `receipt jwks`.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  call,
  DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
  hasStatus,
  loadKubeConfig,
} from '../../adapters/kubernetes/api.js';
import { type JsonWebKeySet, receiptJwksFromPem } from '../../adapters/receipts/receipt-key.js';
import { type ReceiptKeyPin, signingKeyPin } from '../../adapters/receipts/receipt-key-pin.js';
import {
  NAMESPACE,
  RECEIPT_KEY_FILE,
  RECEIPT_KEY_SECRET,
  RECEIPT_KEY_SECRET_REF,
} from '../manifests/common.js';

/** The receipt key's public JWKS and its pins. */
export interface ClusterReceiptKey {
  jwks: JsonWebKeySet;
  pin: ReceiptKeyPin;
}

/** Where the receipt key lives, for messages. */

/**
 * Reads the receipt key Secret through `kc` and returns its public JWKS and pins; `undefined` when
 * the Secret does not exist (no bring-up yet). Rejects naming the Secret when the API call fails or
 * the Secret holds no P-256 private key (never quoting it).
 */
export async function readClusterReceiptKey(
  kc: KubeConfig,
  options: { requestTimeoutInMs?: number } = {},
): Promise<ClusterReceiptKey | undefined> {
  const core = kc.makeApiClient(CoreV1Api);
  let data: Record<string, string> | undefined;
  try {
    data = (
      await call(
        `reading ${RECEIPT_KEY_SECRET_REF}`,
        options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
        () => core.readNamespacedSecret({ name: RECEIPT_KEY_SECRET, namespace: NAMESPACE }),
      )
    ).data;
  } catch (err) {
    if (hasStatus(err, 404)) return undefined;
    throw err;
  }
  const pem = data?.[RECEIPT_KEY_FILE];
  if (pem === undefined) throw new Error(`${RECEIPT_KEY_SECRET_REF} has no ${RECEIPT_KEY_FILE}`);
  let jwks: JsonWebKeySet;
  try {
    jwks = await receiptJwksFromPem(Buffer.from(pem, 'base64'));
  } catch (err) {
    throw new Error(`${RECEIPT_KEY_SECRET_REF}: ${(err as Error).message}`);
  }
  return { jwks, pin: await signingKeyPin(jwks) };
}

/**
 * The lines `confboot init` and `apply` print for the receipt key: its kid and its RFC 7638
 * SHA-256 thumbprint in hex, named as the `confboot receipt verify` flags that pin them.
 */
export function receiptKeyLines(pin: ReceiptKeyPin): string[] {
  return [`Receipt key kid: ${pin.kid}`, `Receipt key jwks-sha256: ${pin.jwksSha256}`];
}

/**
 * The pins of the receipt key a bring-up through `kubeconfig` left in the cluster (read back: a
 * re-run keeps the key it found). `undefined` after a dry run that found no Secret yet; rejects when
 * a real bring-up left none.
 */
export async function receiptKeyAfterBringUp(
  kubeconfig: string,
  dryRun: boolean,
): Promise<ReceiptKeyPin | undefined> {
  const key = await readClusterReceiptKey(loadKubeConfig(kubeconfig));
  if (key === undefined && !dryRun)
    throw new Error(`${RECEIPT_KEY_SECRET_REF} is missing after the bring-up`);
  return key?.pin;
}
