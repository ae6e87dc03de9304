/**
 * Join ticket issuance (join service logic, docs/upstream.md, with its differences). Runs on control
 * planes behind attested TLS: by the time a request arrives here the caller's attestation has
 * passed. It derives the node's keys, creates a bootstrap token, signs the kubelet CSR after
 * upstream's checks, and records the joining node. Unlike upstream it binds the kubelet certificate
 * to the caller (docs/identity.md): with a PeerIdentity the caller's address must belong to an
 * instance of this cluster, and the CSR may ask only for that instance's name, addresses and role;
 * without one, the CSR's IP addresses must be the caller's own. It also binds each state disk to the
 * node that first asked for its key (DiskBindings port): another node asking with that disk UUID,
 * by join or rejoin, gets nothing, and nothing is issued when the record cannot be consulted. A
 * node or disk on the deny list (DenyList port) is refused as soon as the request names it; a
 * rejoin, which names only its disk, also by the caller's instance name and the name the disk was
 * bound under. Before anything else each call checks that the caller's attestation still holds
 * (attestation-freshness.ts): its measurement set within its validity window, its connection
 * attested at most a minute ago. Each join ticket also carries the emergency SSH CA and a host
 * certificate for the node's SSH host key (ssh-ticket.ts); who the caller is and which disk is
 * theirs is decided in caller-binding.ts.
 * Errors carry precise kinds (the gRPC
 * edge maps them to InvalidArgument, PermissionDenied, Unavailable, FailedPrecondition, …) and never
 * contain secrets. Each refusal carries its reason code (ports/join-refusal.ts): the checks name
 * theirs, and a failure of a dependency that names none is `dependency-failed`.
 */
import type { BootstrapTokens } from '../ports/bootstrap-tokens.js';
import type { CertificateAuthority, CsrInfo } from '../ports/certificate-authority.js';
import type { Clock } from '../ports/clock.js';
import type { ClusterFacts } from '../ports/cluster-facts.js';
import { DENY_LIST_REASON, type DenyList, type DenyListIdentity } from '../ports/deny-list.js';
import type { DiskBindings } from '../ports/disk-bindings.js';
import { ConfbootError, isConfbootError, messageOf } from '../ports/errors.js';
import type { JoinCall, JoinCaller, JoinDecision } from '../ports/join-call.js';
import { callRefusalReasonOf, joinRefusal, withJoinRefusalReason } from '../ports/join-refusal.js';
import type { KMS } from '../ports/kms.js';
import type { Logger } from '../ports/logger.js';
import type { PeerIdentity } from '../ports/peer-identity.js';
import type { Random } from '../ports/random.js';
import type {
  ControlPlaneFile,
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from '../ports/types.js';
import { checkAttestationHolds } from './attestation-freshness.js';
import { bindDisk, checkCaller, ownerOf, releaseStaleBindings, resolveCaller } from './caller-binding.js';
import { dependencyError } from './errors.js';
import {
  KUBERNETES_JOIN_TOKEN_TTL_MS,
  MEASUREMENT_SECRET_KEY_ID,
  MEASUREMENT_SECRET_LENGTH,
  STATE_DISK_KEY_LENGTH,
} from './key-derivation.js';

import { kubeletGrant } from './kubelet-csr-approval.js';
import { hostCertificatePrincipals, requestedHostKey, SshTicketSigner } from './ssh-ticket.js';
import { checkDiskUuid, checkKubeletCsr } from './ticket-request.js';

/** The ports and facts ticket issuance uses. */
export interface TicketIssuerDeps {
  kms: Pick<KMS, 'getDataKey'>;
  ca: CertificateAuthority;
  tokens: BootstrapTokens;
  facts: ClusterFacts;
  /** The cluster's measurement salt (from `/var/config/measurementSalt`). */
  measurementSalt: Uint8Array;
  /** `<vpcIP>:6443` of this control plane. */
  apiServerEndpoint: string;
  clock: Clock;
  /** Nonces of the emergency SSH host certificates. */
  random: Pick<Random, 'bytes'>;
  logger: Logger;
  /**
   * Which node each state disk belongs to. Consulted (and written on first use) before any state
   * disk key is requested; must be shared by every join service replica.
   */
  diskBindings: DiskBindings;
  /**
   * Which instance is behind a caller address (the cloud's metadata). With it, a caller must be an
   * instance of this cluster and may ask only for its own node name, addresses and role; without it,
   * the CSR's IP addresses must be the caller's own address (the minimum binding).
   */
  identity?: PeerIdentity;
  /**
   * Node identities never to issue a ticket to, checked once the request named the node (join: the
   * kubelet CSR's node name and the disk UUID; rejoin: the disk UUID, the caller's resolved instance
   * name, and the node name the disk was bound under), before any key is asked for. Default: nobody
   * is denied.
   */
  denyList?: DenyList;
}

/** Issues join and rejoin tickets: the domain's side of the join call. */
export class TicketIssuer implements JoinCall {
  readonly #deps: TicketIssuerDeps;
  /**
   * The cluster's measurement secret, once the key service gave it: the same for every node for the
   * cluster's life (it is derived from the master secret alone), so it is asked for once, not once
   * per ticket. A failed request is not kept; the next ticket asks again.
   */
  #measurementSecret: Promise<Uint8Array> | undefined;
  /** Fields 11 and 12 (emergency SSH); derives the SSH CA once. */
  readonly #ssh: SshTicketSigner;

  /** Throws `invalid-argument` when the measurement salt or the API server endpoint is empty. */
  constructor(deps: TicketIssuerDeps) {
    if (deps.measurementSalt.length === 0)
      throw new ConfbootError('invalid-argument', 'ticket issuer: empty measurement salt');
    if (deps.apiServerEndpoint === '')
      throw new ConfbootError('invalid-argument', 'ticket issuer: empty API server endpoint');
    this.#deps = { ...deps, measurementSalt: new Uint8Array(deps.measurementSalt) };
    this.#ssh = new SshTicketSigner(deps);
  }

  /** The measurement secret (a copy per ticket), asked from the key service the first time. */
  async #getMeasurementSecret(): Promise<Uint8Array> {
    let pending = this.#measurementSecret;
    if (pending === undefined) {
      const asked = this.#deps.kms.getDataKey(MEASUREMENT_SECRET_KEY_ID, MEASUREMENT_SECRET_LENGTH);
      pending = asked;
      this.#measurementSecret = asked;
      asked.catch(() => {
        if (this.#measurementSecret === asked) this.#measurementSecret = undefined;
      });
    }
    return new Uint8Array(await pending);
  }

  /**
   * Decides on a join ticket for an attested node. Refuses with `invalid-argument` for a bad disk
   * UUID or CSR (also IP addresses that are not the caller's), `permission-denied` when the caller is
   * not an instance of this cluster, asks for another node's name or role, or is on the deny list,
   * `unavailable` when metadata, the KMS or Kubernetes is down, `failed-precondition` when another
   * control plane is joining; the message names the peer and the step, never a secret. Every refusal
   * of the request itself comes before the first key-service call. The decision names the node once
   * its CSR was read, whatever the outcome. Field sizes are checked before this is called
   * (checkRequestSizes, by the join service's guard).
   */
  async issueJoinTicket(req: JoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<JoinTicket>> {
    const named: { nodeName?: string; releasedDisks?: string[] } = {};
    try {
      return { issued: true, ticket: await this.#join(req, caller, named), ...named };
    } catch (refusal) {
      return { issued: false, refusal: reasoned(refusal), ...named };
    }
  }

  /** Decides on a rejoin ticket; see {@link #rejoin}. */
  async issueRejoinTicket(req: RejoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<RejoinTicket>> {
    try {
      return { issued: true, ticket: await this.#rejoin(req, caller) };
    } catch (refusal) {
      return { issued: false, refusal: reasoned(refusal) };
    }
  }

  /**
   * The join ticket for `req`; `named` gets the node name as soon as the CSR named it, and the disks
   * whose stale bindings the join released.
   */
  async #join(
    req: JoinTicketRequest,
    ctx: JoinCaller,
    named: { nodeName?: string; releasedDisks?: string[] },
  ): Promise<JoinTicket> {
    const { kms, ca, tokens, facts, clock, logger } = this.#deps;
    const started = clock.now().getTime();
    const op = `issuing join ticket for ${ctx.peer}`;
    // An invalid argument is the request's fault (its own reason, else malformed-request); any other
    // failure of a step is a dependency's.
    const fail = (step: string, err: unknown) =>
      isConfbootError(err) && err.code === 'invalid-argument'
        ? joinRefusal(
            'invalid-argument',
            callRefusalReasonOf(err) ?? 'malformed-request',
            `${op}: ${step}: ${err.message}`,
            { cause: err, recoverable: false },
          )
        : withJoinRefusalReason(dependencyError(`${op}: ${step}`, err), 'dependency-failed');

    checkAttestationHolds(op, ctx.attestation, clock.now());
    try {
      checkDiskUuid(req.diskUuid);
    } catch (err) {
      throw fail('checking request', err);
    }
    if (req.certificateRequest.length === 0) {
      throw joinRefusal(
        'invalid-argument',
        'malformed-request',
        `${op}: checking request: no certificate signing request`,
      );
    }
    let nodeName: string;
    let csr: CsrInfo;
    let hostKey: ReturnType<typeof requestedHostKey>;
    try {
      hostKey = requestedHostKey(req.hostPublicKey);
    } catch (err) {
      throw fail('checking request', err);
    }
    try {
      csr = await ca.inspectCsr(req.certificateRequest);
      nodeName = checkKubeletCsr(csr);
    } catch (err) {
      // A CSR that cannot be parsed is the caller's fault whatever the CA reports.
      throw joinRefusal('invalid-argument', 'malformed-request', `${op}: checking CSR: ${messageOf(err)}`, {
        cause: err,
      });
    }
    named.nodeName = nodeName;
    this.#checkDenyList(op, { nodeName, diskUuid: req.diskUuid });
    const { ipAddresses, addresses, ...owner } = await checkCaller(
      this.#deps.identity,
      op,
      ctx,
      req,
      nodeName,
      csr,
    );
    const ssh = hostCertificatePrincipals(req.hostCertificatePrincipals, { nodeName, addresses });
    if (hostKey !== undefined && ssh.dropped.length > 0)
      logger.warn('Left names that are not the node out of its SSH host certificate', {
        peer: ctx.peer,
        nodeName,
        dropped: ssh.dropped,
      });
    await bindDisk(this.#deps, op, { diskUuid: req.diskUuid.toLowerCase(), nodeName, ...owner });

    const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
      if (ctx.signal?.aborted)
        throw joinRefusal('unavailable', 'cancelled', `${op}: ${name}: the request was cancelled`, {
          recoverable: true,
        });
      try {
        return await fn();
      } catch (err) {
        throw fail(name, err);
      }
    };
    // Independent reads run together; what has an effect keeps upstream's order after them: the
    // bootstrap token only once both keys exist, and before the CA hash is read (upstream order);
    // the kubelet certificate only once the token exists. Each step still checks the signal first.
    const [measurementSecret, stateDiskKey, sshFields] = await Promise.all([
      step('getting measurement secret', () => this.#getMeasurementSecret()),
      step('getting state disk key', () => kms.getDataKey(req.diskUuid.toLowerCase(), STATE_DISK_KEY_LENGTH)),
      step('signing emergency SSH host certificate', () => this.#ssh.fields(hostKey, ssh.principals)),
    ]);
    const [[token, discoveryTokenCaCertHash], kubernetesComponents] = await Promise.all([
      (async () => {
        const created = await step('creating bootstrap token', () =>
          tokens.createToken(KUBERNETES_JOIN_TOKEN_TTL_MS),
        );
        const hash = await step('computing discovery CA hash', () => tokens.discoveryCaCertHash());
        return [created, hash] as const;
      })(),
      step('reading Kubernetes components', () => facts.components()),
    ]);
    const [kubeletCert, controlPlaneFiles] = await Promise.all([
      // The certificate names what was checked (node name, addresses), nothing else of the CSR.
      step('signing kubelet certificate', () =>
        ca.signKubeletCsr(req.certificateRequest, { nodeName, ipAddresses }),
      ),
      req.isControlPlane
        ? step('loading control-plane files', () => ca.controlPlaneFiles())
        : Promise.resolve<ControlPlaneFile[]>([]),
    ]);
    // The record also says which bootstrap token and key the kubelet's client CSR must use.
    await step('recording joining node', () =>
      facts.addJoiningNode(nodeName, req.isControlPlane, kubeletGrant(token, csr.publicKeySha256)),
    );
    if (ctx.signal?.aborted)
      throw joinRefusal('unavailable', 'cancelled', `${op}: the request was cancelled`, {
        recoverable: true,
      });
    const released = await releaseStaleBindings(this.#deps, req.diskUuid.toLowerCase(), owner);
    if (released.length > 0) named.releasedDisks = released;

    logger.info('Issued join ticket', {
      peer: ctx.peer,
      nodeName,
      isControlPlane: req.isControlPlane,
      durationMs: clock.now().getTime() - started,
    });
    return {
      stateDiskKey,
      measurementSalt: new Uint8Array(this.#deps.measurementSalt),
      measurementSecret,
      kubeletCert,
      apiServerEndpoint: this.#deps.apiServerEndpoint,
      token,
      discoveryTokenCaCertHash,
      controlPlaneFiles,
      kubernetesVersion: '',
      kubernetesComponents,
      ...sshFields,
    };
  }

  /** Throws `permission-denied` (reason {@link DENY_LIST_REASON}) when the deny list names the caller. */
  #checkDenyList(op: string, identity: DenyListIdentity): void {
    const m = this.#deps.denyList?.match(identity);
    if (m === undefined) return;
    const what = m.kind === 'node' ? `node ${JSON.stringify(m.value)}` : `disk ${m.value}`;
    throw new ConfbootError('permission-denied', `${op}: ${what} is on the join service's deny list`, {
      recoverable: false,
      reason: DENY_LIST_REASON,
    });
  }

  /**
   * Issues a rejoin ticket (state disk key and measurement secret) to a rebooting node; no
   * Kubernetes interaction besides the disk binding. The disk must be bound to the caller (its
   * instance with a PeerIdentity, else its address); a disk nobody is bound to yet (joined before
   * bindings were recorded) is bound to the caller now. Same error kinds as a join.
   */
  async #rejoin(req: RejoinTicketRequest, ctx: JoinCaller): Promise<RejoinTicket> {
    const { kms, clock, logger } = this.#deps;
    const op = `issuing rejoin ticket for ${ctx.peer}`;
    checkAttestationHolds(op, ctx.attestation, clock.now());
    try {
      checkDiskUuid(req.diskUuid);
    } catch (err) {
      throw joinRefusal(
        'invalid-argument',
        'malformed-request',
        `${op}: checking request: ${messageOf(err)}`,
        {
          cause: err,
        },
      );
    }
    this.#checkDenyList(op, { diskUuid: req.diskUuid });
    const caller = await resolveCaller(this.#deps.identity, op, ctx);
    // A rejoin names no node itself: the deny list is asked for the caller's resolved instance
    // name, and for the name the disk was bound under when it joined.
    if (caller.name !== undefined) this.#checkDenyList(op, { nodeName: caller.name });
    const bound = await bindDisk(this.#deps, op, {
      diskUuid: req.diskUuid.toLowerCase(),
      nodeName: caller.name ?? caller.ip ?? ctx.peer,
      ...ownerOf(caller, ctx.peer),
    });
    this.#checkDenyList(op, { nodeName: bound.nodeName });
    const [measurementSecret, stateDiskKey] = await Promise.all([
      this.#getMeasurementSecret().catch((err: unknown) => {
        throw dependencyError(`${op}: getting measurement secret`, err);
      }),
      kms.getDataKey(req.diskUuid.toLowerCase(), STATE_DISK_KEY_LENGTH).catch((err: unknown) => {
        throw dependencyError(`${op}: getting state disk key`, err);
      }),
    ]);
    logger.info('Issued rejoin ticket', { peer: ctx.peer });
    return { stateDiskKey, measurementSecret };
  }
}

/**
 * A refusal with its reason code: the code its check set, else (a dependency's failure, wrapped on
 * the way) `dependency-failed`, or `malformed-request` for an `invalid-argument` one. Anything that
 * is not a ConfbootError stays as it is (a bug: `internal`, its message never sent).
 */
function reasoned(refusal: unknown): unknown {
  if (!isConfbootError(refusal)) return refusal;
  return withJoinRefusalReason(
    refusal,
    refusal.code === 'invalid-argument' ? 'malformed-request' : 'dependency-failed',
  );
}
