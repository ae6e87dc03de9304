/**
 * The disk mapper of one node (app layer, plain composition): the domain {@link DiskMapper} on the
 * node's ports, the cryptsetup state disk (validated detached header), and on control planes the
 * recovery endpoint (recoverproto.API over attested TLS, this node attesting) with the audited
 * Shamir library for k-of-n shares. The bootstrapper program runs it before the InitServer and
 * the JoinClient (and alone with `--disk-mapper-only`, the disk mapper's own systemd unit).
 *
 * A node marked already (PCR 15 set) whose state disk is marked for reset failed after the node lock
 * earlier in this boot (its reboot did not happen, or the bootstrapper was started again): it must
 * not carry on as a bootstrapped node, so the disk mapper asks for the reboot again and fails.
 */
import { ShamirSecretSharing } from '../../adapters/crypto/shamir-secret-sharing.js';
import {
  CryptsetupStateDiskSetup,
  type StateDiskIntegrity,
} from '../../adapters/disk/cryptsetup-state-disk-setup.js';
import { AttestedRecoveryEndpoint, RECOVERY_PORT } from '../../adapters/grpc/recover.js';
import type { BackoffOptions } from '../../domain/backoff.js';
import { DiskMapper, type DiskMapperOutcome } from '../../domain/disk-mapper.js';
import type { RecoverySharesOptions } from '../../domain/recovery-shares.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { StateDiskSetup } from '../../ports/state-disk-setup.js';
import type { BootstrapperNodeDeps, ListenAddress } from './node.js';

/** Where the state disk is and how to format and map it. */
export interface StateDiskOptions {
  devicePath: string;
  /** Integrity protection (default `hmac-sha256`, authenticated encryption); see StateDiskIntegrity. */
  integrity?: StateDiskIntegrity;
  initialPassphrasePath?: string;
  /** dm-crypt mapping name when the disk is reopened; undefined checks the key only (no device-mapper). */
  mappingName?: string;
  /** `luksFormat` KDF arguments; default the adapter's (Argon2id, 4 passes, 64 MiB, forced). */
  formatPbkdfArgs?: string[];
  /** Mount a reopened disk's mapping here before the node state is read (needs `mappingName`). */
  mountPoint?: string;
}

/** Options of {@link createNodeDiskMapper}. */
export interface NodeDiskMapperOptions {
  disk: StateDiskOptions | StateDiskSetup;
  /** Where a control plane serves recovery (default 0.0.0.0:9999). */
  recoveryListen?: ListenAddress;
  /** Called once the recovery endpoint listens, with its port. */
  onRecoveryListening?: (port: number) => void;
  joinServicePort?: number;
  backoff?: Partial<BackoffOptions>;
  shares?: RecoverySharesOptions;
  handshakeTimeoutMs?: number;
}

/** The node's disk mapper: `run()` once before the bootstrapper, `stop()` from anywhere. */
export interface NodeDiskMapper {
  /**
   * Gets the state disk ready (the domain {@link DiskMapper}); rejects `failed-precondition` for a
   * node that failed after the node lock earlier in this boot, once the reboot was asked for.
   */
  run(): Promise<DiskMapperOutcome>;
  stop(): void;
}

/**
 * Refuses a node marked with a cluster ID whose state disk is marked for reset (see the module
 * comment), after asking `power` for the reboot. A disk that cannot be read is logged and let be:
 * without it the bootstrapper cannot tell and carries on as before.
 */
async function refuseFailedThisBoot(disk: StateDiskSetup, deps: BootstrapperNodeDeps): Promise<void> {
  let condition: Awaited<ReturnType<StateDiskSetup['inspect']>>;
  try {
    condition = await disk.inspect();
  } catch (err) {
    deps.logger.warn('Could not read the state disk of a marked node', { error: messageOf(err) });
    return;
  }
  if (condition !== 'reset') return;
  deps.logger.error('Node failed after the node lock earlier in this boot; rebooting');
  let note = 'no reboot configured';
  if (deps.power !== undefined) {
    try {
      await deps.power.reboot();
      note = 'reboot requested';
    } catch (err) {
      note = `requesting a reboot failed: ${messageOf(err)}`;
    }
  }
  throw new ConfbootError(
    'failed-precondition',
    `disk mapper: the node failed after the node lock earlier in this boot: PCR 15 is set and the state disk is marked for reset (${note})`,
  );
}

/** Builds the node's disk mapper; `run()` it once before the bootstrapper. */
export function createNodeDiskMapper(
  deps: BootstrapperNodeDeps,
  options: NodeDiskMapperOptions,
): NodeDiskMapper {
  const disk =
    'inspect' in options.disk
      ? options.disk
      : new CryptsetupStateDiskSetup({
          devicePath: options.disk.devicePath,
          ...(options.disk.integrity === undefined ? {} : { integrity: options.disk.integrity }),
          ...(options.disk.initialPassphrasePath === undefined
            ? {}
            : { initialPassphrasePath: options.disk.initialPassphrasePath }),
          ...(options.disk.mappingName === undefined ? {} : { mappingName: options.disk.mappingName }),
          ...(options.disk.formatPbkdfArgs === undefined
            ? {}
            : { formatPbkdfArgs: options.disk.formatPbkdfArgs }),
          ...(options.disk.mountPoint === undefined ? {} : { mountPoint: options.disk.mountPoint }),
        });
  const listen = options.recoveryListen ?? { host: '0.0.0.0', port: RECOVERY_PORT };
  const recovery = new AttestedRecoveryEndpoint({
    issuer: deps.issuer,
    clock: deps.clock,
    host: listen.host,
    port: listen.port,
    logger: deps.logger.child({ component: 'recovery' }),
    ...(options.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: options.handshakeTimeoutMs }),
    ...(options.onRecoveryListening ? { onListening: options.onRecoveryListening } : {}),
  });
  const mapper = new DiskMapper(
    {
      disk,
      rejoinClient: deps.joinClient,
      metadata: deps.metadata,
      marker: deps.marker,
      nodeState: deps.nodeState,
      clock: deps.clock,
      random: deps.random,
      logger: deps.logger.child({ component: 'disk-mapper' }),
      recovery,
      sharing: new ShamirSecretSharing(),
    },
    {
      ...(options.joinServicePort === undefined ? {} : { joinServicePort: options.joinServicePort }),
      ...(options.backoff ? { backoff: options.backoff } : {}),
      ...(options.shares ? { shares: options.shares } : {}),
    },
  );
  return {
    stop: () => mapper.stop(),
    run: async () => {
      const mapped = await mapper.run();
      if (mapped.outcome === 'already-marked') await refuseFailedThisBoot(disk, deps);
      return mapped;
    },
  };
}
