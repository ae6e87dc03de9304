/**
 * Who is asking for a join or rejoin ticket, and which state disk is theirs (the join service's
 * binding of a request to its caller, docs/identity.md). With a PeerIdentity the caller's address
 * must resolve to an instance of this cluster, whose name, addresses and role the request may ask
 * for; without one, only the caller's own address. Each state disk is bound to the owner that first
 * asked for its key: the instance's immutable ID where the cloud has one, else its name, else its
 * address.
 */
import type { CsrInfo } from '../ports/certificate-authority.js';
import { type DiskBinding, type DiskBindings, DiskBoundError } from '../ports/disk-bindings.js';
import { messageOf } from '../ports/errors.js';
import type { JoinCaller } from '../ports/join-call.js';
import { joinRefusal } from '../ports/join-refusal.js';
import { foldNodeName } from '../ports/kubernetes-node.js';
import type { Logger } from '../ports/logger.js';
import { callerIp } from '../ports/peer-address.js';
import type { PeerIdentity, PeerInstance } from '../ports/peer-identity.js';
import type { JoinTicketRequest } from '../ports/types.js';
import { dependencyError } from './errors.js';
import { checkIps } from './ticket-request.js';

const KNOWN_ROLES: ReadonlySet<string> = new Set(['ControlPlane', 'Worker']);

/** Who a disk binding names as its owner, and the by-name owner a binding made before IDs may name. */
export interface Owner {
  owner: string;
  /** `instance/<name>` when `owner` is an instance ID: bindings recorded by name still match. */
  legacyOwner?: string;
}

/** A caller as resolved: its address, and with a PeerIdentity its instance and folded name. */
export interface ResolvedCaller {
  ip: string | undefined;
  instance?: PeerInstance;
  name?: string;
}

/**
 * Who the caller is: its address, and with a PeerIdentity its instance of this cluster (name
 * normalised). Throws `permission-denied` when the caller is not an instance of this cluster and
 * `unavailable` when the cloud cannot say or has not named it yet.
 */
export async function resolveCaller(
  identity: PeerIdentity | undefined,
  op: string,
  ctx: JoinCaller,
): Promise<ResolvedCaller> {
  const ip = callerIp(ctx.peer);
  if (identity === undefined) return { ip };
  const denied = (why: string) =>
    joinRefusal('permission-denied', 'unknown-caller', `${op}: ${why}`, { recoverable: false });
  if (ip === undefined) throw denied(`caller ${ctx.peer} is not an instance of this cluster`);
  let instance: PeerInstance | undefined;
  try {
    instance = await identity.resolve(ip);
  } catch (err) {
    throw dependencyError(`${op}: resolving the caller's instance`, err);
  }
  if (instance === undefined) throw denied(`caller ${ip} is not an instance of this cluster`);
  const name = foldNodeName(instance.name);
  if (name === '' || !KNOWN_ROLES.has(instance.role)) {
    throw joinRefusal(
      'unavailable',
      'dependency-failed',
      `${op}: the cloud has not assigned a name and role to caller ${ip} yet (name ${JSON.stringify(instance.name)}, role ${instance.role})`,
    );
  }
  return { ip, instance, name };
}

/**
 * The owner string a disk binding records for a resolved caller: the cloud's immutable instance
 * ID where it has one (`instance-id/<id>`), else the folded instance name (`instance/<name>`),
 * else the address (`address/<ip>`, without a PeerIdentity).
 */
export function ownerOf(caller: ResolvedCaller, peer: string): Owner {
  const byName = caller.name !== undefined ? `instance/${caller.name}` : `address/${caller.ip ?? peer}`;
  const id = caller.instance?.instanceId;
  if (id !== undefined && id !== '') return { owner: `instance-id/${id}`, legacyOwner: byName };
  return { owner: byName };
}

/**
 * Whether the binding in force belongs to the caller: the same owner, or a binding recorded by
 * name before instance IDs were recorded (`instance/<name>`) for the caller's folded name.
 */
function ownedBy(inForce: DiskBinding, binding: DiskBinding & Owner): boolean {
  return inForce.owner === binding.owner || inForce.owner === binding.legacyOwner;
}

/**
 * Binds the state disk to the caller, or refuses when it is bound to someone else
 * ({@link DiskBoundError}); resolves with the binding in force (the caller's). Fails closed: when
 * the record cannot be consulted nothing is issued.
 */
export async function bindDisk(
  deps: { diskBindings: DiskBindings; logger: Logger },
  op: string,
  request: DiskBinding & Owner,
): Promise<DiskBinding> {
  const { legacyOwner: _, ...binding } = request;
  let inForce: DiskBinding;
  try {
    inForce = await deps.diskBindings.bind(binding);
  } catch (err) {
    throw dependencyError(`${op}: recording which node disk ${binding.diskUuid} belongs to`, err);
  }
  if (ownedBy(inForce, request)) return inForce;
  deps.logger.warn('Refused a state disk bound to another node', {
    diskUuid: binding.diskUuid,
    boundTo: inForce.nodeName,
    boundOwner: inForce.owner,
    caller: binding.nodeName,
    callerOwner: binding.owner,
  });
  throw new DiskBoundError(`${op}: disk ${binding.diskUuid} belongs to another node`);
}

/**
 * After a fresh join with disk `keep`: removes every other binding recorded under the caller's
 * instance (its owner strings), since an instance has one state disk and a fresh join means the
 * old one was wiped and reformatted with a new UUID. Only with a PeerIdentity, where the owner is
 * the instance the attested caller's address resolved to; a binding by address is never released,
 * because addresses move between instances. Resolves with the released disk UUIDs; a failure is
 * logged and releases nothing more (the stale record is harmless: its UUID no longer exists).
 */
export async function releaseStaleBindings(
  deps: { diskBindings: DiskBindings; logger: Logger; identity?: PeerIdentity | undefined },
  keep: string,
  owner: Owner,
): Promise<string[]> {
  if (deps.identity === undefined) return [];
  const owners = owner.legacyOwner === undefined ? [owner.owner] : [owner.owner, owner.legacyOwner];
  try {
    const released = await deps.diskBindings.releaseOthers(owners, keep);
    if (released.length > 0)
      deps.logger.info('Released stale disk bindings of the joining instance', {
        owner: owner.owner,
        kept: keep,
        released: released.map((b) => b.diskUuid),
      });
    return released.map((b) => b.diskUuid);
  } catch (err) {
    deps.logger.warn('Could not release stale disk bindings of the joining instance', {
      owner: owner.owner,
      error: messageOf(err),
    });
    return [];
  }
}

/**
 * Binds the request to its caller (before any key-service call): the caller's instance (with a
 * PeerIdentity) or address (without) decides which node name, IP addresses and role it may ask for.
 * Returns the caller's owner string for the disk binding, the checked IP addresses the kubelet
 * certificate may name, and the caller's addresses (its instance's, or its own) that an SSH host
 * certificate may name.
 */
export async function checkCaller(
  identity: PeerIdentity | undefined,
  op: string,
  ctx: JoinCaller,
  req: JoinTicketRequest,
  nodeName: string,
  csr: CsrInfo,
): Promise<Owner & { ipAddresses: string[]; addresses: string[] }> {
  const caller = await resolveCaller(identity, op, ctx);
  const { ip, instance } = caller;
  if (instance === undefined) {
    const ipAddresses = checkIps(
      op,
      csr.ipAddresses,
      ip === undefined ? [] : [ip],
      `the caller's address ${ip ?? ctx.peer}`,
    );
    const addresses = ip === undefined ? [] : [ip];
    return { ...ownerOf(caller, ctx.peer), ipAddresses, addresses };
  }
  const denied = (why: string) =>
    joinRefusal('permission-denied', 'caller-mismatch', `${op}: ${why}`, { recoverable: false });
  const resolvedName = caller.name as string;
  if (resolvedName !== nodeName) {
    throw denied(
      `kubelet CSR is for node ${JSON.stringify(nodeName)}, but caller ${ip} is node ${JSON.stringify(resolvedName)}`,
    );
  }
  const ipAddresses = checkIps(op, csr.ipAddresses, instance.ips, `node ${JSON.stringify(resolvedName)}`);
  if (req.isControlPlane !== (instance.role === 'ControlPlane')) {
    throw denied(
      req.isControlPlane
        ? `node ${JSON.stringify(resolvedName)} is a worker and may not join as a control plane (no control-plane files)`
        : `node ${JSON.stringify(resolvedName)} is a control plane and may not join as a worker`,
    );
  }
  return { ...ownerOf(caller, ctx.peer), ipAddresses, addresses: [...instance.ips] };
}
