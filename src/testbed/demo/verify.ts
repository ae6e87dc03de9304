/**
 * The demo's proof stage: after the run, each node's state disk opens only with the key its outcome
 * requires (tested through the disk adapter on the validated header), PCR 15 holds the cluster ID
 * measurement exactly for the nodes that joined, and each joined worker's receipt verifies and names
 * it.
 */
import { readFile } from 'node:fs/promises';
import { CryptsetupDisk } from '../../adapters/disk/cryptsetup-disk.js';
import type { HkdfKms } from '../../adapters/kms/hkdf-kms.js';
import type { JsonWebKeySet } from '../../adapters/receipts/receipt-key.js';
import { verifyReceipt } from '../../adapters/receipts/verify-receipt.js';
import { expectedPcr15 } from '../../adapters/tpm/pcr15-marker.js';
import { type DemoNode, receiptPathOf } from './node.js';
import type { DemoDiskState, DemoNodeResult } from './result.js';

/** How a joining node's run ended, as the demo observed it. */
export interface NodeOutcome {
  joined: boolean;
  reason: string;
}

/** What the proof stage checks against. */
export interface ProofInputs {
  /** Every node, the first control plane first. */
  nodes: DemoNode[];
  /** The joining nodes' outcomes by name. */
  outcomes: ReadonlyMap<string, NodeOutcome>;
  /** The key service's derivation, to compute each disk's issued key. */
  kms: HkdfKms;
  clusterId: Uint8Array;
  jwks: JsonWebKeySet;
  /** Receives every secret the proof handles (see DemoOptions.onSecret). */
  secret: (kind: string, value: Uint8Array) => void;
}

export const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Which keys open a disk, from whether the issued key and the initial passphrase do. */
function diskStateOf(opensIssued: boolean, opensInitial: boolean): DemoDiskState {
  if (opensIssued) return opensInitial ? 'both' : 'issued-key';
  return opensInitial ? 'initial-passphrase' : 'neither';
}

/** Which keys open `node`'s state disk, through the disk adapter (one open, two keyslot tests). */
async function diskState(node: DemoNode, inputs: ProofInputs): Promise<DemoDiskState> {
  const disk = new CryptsetupDisk({
    devicePath: node.disk.imagePath,
    initialPassphrasePath: node.disk.initialPassphrasePath,
  });
  const release = await disk.open();
  try {
    const issuedKey = await inputs.kms.getDataKey(await disk.uuid(), 32);
    const initialKey = new Uint8Array(await readFile(node.disk.initialPassphrasePath));
    inputs.secret(`${node.name} state disk key`, issuedKey);
    inputs.secret(`${node.name} initial passphrase`, initialKey);
    return diskStateOf(await disk.testPassphrase(issuedKey), await disk.testPassphrase(initialKey));
  } finally {
    await release();
  }
}

/** The proof for one node. */
async function proveNode(node: DemoNode, isFirst: boolean, inputs: ProofInputs): Promise<DemoNodeResult> {
  const outcome = isFirst
    ? { joined: true, reason: 'initialised by confboot init' }
    : inputs.outcomes.get(node.name);
  const joined = outcome?.joined ?? false;
  const disk = await diskState(node, inputs);
  const pcr15 = (await node.tpm.readPcrs([15])).get(15) ?? new Uint8Array(32);
  const receipt = isFirst ? undefined : await readReceipt(node);
  const receiptVerified =
    isFirst || !joined ? undefined : await receiptNames(receipt, inputs.jwks, node.name);
  const expected = joined ? expectedPcr15(inputs.clusterId) : new Uint8Array(32);
  return {
    name: node.name,
    role: node.role,
    boot: node.boot,
    joined,
    reason: isFirst
      ? 'initialised by confboot init'
      : joined
        ? 'joined with a join ticket'
        : shorten(outcome?.reason ?? ''),
    disk,
    diskVerified: disk === (joined ? 'issued-key' : 'initial-passphrase'),
    pcr15: hex(pcr15),
    pcr15Verified: Buffer.from(pcr15).equals(Buffer.from(expected)),
    ...(receipt !== undefined ? { receipt } : {}),
    ...(receiptVerified !== undefined ? { receiptVerified } : {}),
    ...(!joined && node.refusal !== undefined ? { toldNode: told(node.refusal) } : {}),
  };
}

/** The proof for every node, in order (the first node is the control plane `confboot init` initialised). */
export async function proveNodes(inputs: ProofInputs): Promise<DemoNodeResult[]> {
  const results: DemoNodeResult[] = [];
  for (const [i, node] of inputs.nodes.entries()) results.push(await proveNode(node, i === 0, inputs));
  return results;
}

/** The receipt a node's join flow wrote, or undefined when it wrote none. */
async function readReceipt(node: Pick<DemoNode, 'dir'>): Promise<string | undefined> {
  try {
    return (await readFile(receiptPathOf(node), 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** Whether `receipt` verifies against `jwks` and is about node `name`. */
async function receiptNames(
  receipt: string | undefined,
  jwks: JsonWebKeySet,
  name: string,
): Promise<boolean> {
  if (receipt === undefined) return false;
  try {
    return (await verifyReceipt(receipt, jwks)).claims['confboot.receipt'].node === name;
  } catch {
    return false;
  }
}

/** The audited refusal without the leading variant noise, keeping the PCR mismatch text. */
export function shorten(reason: string): string {
  const i = reason.indexOf('measurement validation failed');
  return i >= 0 ? reason.slice(i) : reason;
}

/** The reason a deny verdict gave the node: what follows "refused by the peer (check …): ". */
export function told(refusal: string): string {
  const m = /refused by the peer \(check [^)]*\): (.*)$/s.exec(refusal);
  return m?.[1] ?? refusal;
}
