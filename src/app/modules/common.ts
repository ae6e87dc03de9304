/**
 * The common node module (app layer, DI wiring): every binding a bootstrapper node needs that does
 * not depend on the cloud — clock, randomness, logging, the TPM and the PCR 15 marker, the state
 * disk, files and node state, kubelet CSRs, the init secret check, the cluster KMS, kubeadm, the
 * join client and the node lock — and the cloud module, which binds MetadataAPI from the node's
 * cloud registry entry and Issuer from its variant registry entry. Wiring reads like a table: one
 * `bind` per token, singleton scope said explicitly, domain classes built without decorators
 * through `toResolvedValue(factory, [TOKENS])`.
 */

import { ContainerModule, type ContainerModuleLoadOptions } from 'inversify';
import { HttpComponentInstaller } from '../../adapters/components/http-component-installer.js';
import { BcryptSecretHash } from '../../adapters/crypto/bcrypt-secret-hash.js';
import { CryptsetupDisk } from '../../adapters/disk/cryptsetup-disk.js';
import { GrpcJoinTicketClient } from '../../adapters/grpc/join-client.js';
import { ClusterKmsFactory } from '../../adapters/kms/cluster-kms-factory.js';
import {
  KUBELET_BOOTSTRAP_KEY_PATH,
  KubeadmInitializer,
  KubeadmJoiner,
} from '../../adapters/kubernetes/kubeadm.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { RingLogCollector } from '../../adapters/log/ring-log-collector.js';
import { X509CsrFactory } from '../../adapters/pki/x509-csr-factory.js';
import { OpenSshHostKeyFile } from '../../adapters/ssh/openssh-host-key.js';
import { ExclusiveFileWriter } from '../../adapters/state/exclusive-file-writer.js';
import { JsonNodeStateStore } from '../../adapters/state/json-node-state-store.js';
import { CryptoRandom } from '../../adapters/system/crypto-random.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { Pcr15Marker } from '../../adapters/tpm/pcr15-marker.js';
import { Tpm2ToolsTpm } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { NodeLock } from '../../domain/node-lock.js';
import { Clock } from '../../ports/clock.js';
import { ClusterInitializer } from '../../ports/cluster-initializer.js';
import { ClusterJoiner } from '../../ports/cluster-joiner.js';
import { CsrFactory } from '../../ports/csr-factory.js';
import { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { FileWriter } from '../../ports/file-writer.js';
import { Issuer } from '../../ports/issuer.js';
import { JoinTicketClient } from '../../ports/join-ticket-client.js';
import { KmsFactory } from '../../ports/kms-factory.js';
import { LogCollector } from '../../ports/log-collector.js';
import { Logger } from '../../ports/logger.js';
import { MetadataAPI } from '../../ports/metadata-api.js';
import { NodeMarker } from '../../ports/node-marker.js';
import { NodeStateStore } from '../../ports/node-state-store.js';
import { Random } from '../../ports/random.js';
import { SecretHash } from '../../ports/secret-hash.js';
import { SshHostKey } from '../../ports/ssh-host-key.js';
import { Tpm } from '../../ports/tpm.js';
import type { BootstrapperNodeDeps } from '../bootstrapper/node.js';
import { cloudEntry, variantEntry } from '../registry/index.js';
import { NodeConfig } from '../registry/node-config.js';

/** DI token of the node lock both bootstrapper sides share (the domain's {@link NodeLock}). */
export const SharedNodeLock = Symbol.for('confboot.NodeLock');

/** DI token of the ring buffer behind {@link LogCollector} (the logger tees into it). */
export const LogRing = Symbol.for('confboot.LogRing');

/** DI token of everything `startBootstrapperNode` needs ({@link BootstrapperNodeDeps}). */
export const BootstrapperDeps = Symbol.for('confboot.BootstrapperDeps');

/** Every token a node container binds, for `--check-wiring` (the cloud module binds the first two). */
export const NODE_TOKENS: readonly symbol[] = Object.freeze([
  MetadataAPI,
  Issuer,
  NodeConfig,
  Clock,
  Random,
  LogRing,
  Logger,
  LogCollector,
  Tpm,
  NodeMarker,
  SharedNodeLock,
  EncryptedDisk,
  FileWriter,
  SshHostKey,
  NodeStateStore,
  CsrFactory,
  SecretHash,
  KmsFactory,
  ClusterJoiner,
  ClusterInitializer,
  JoinTicketClient,
  BootstrapperDeps,
]);

type Bind = ContainerModuleLoadOptions['bind'];

/** The common module for `config`; load it together with {@link cloudModule}. */
export function commonModule(config: NodeConfig): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<NodeConfig>(NodeConfig).toConstantValue(config);
    bindSystem(bind);
    bindTpmAndDisk(bind);
    bindCluster(bind);
    bindBootstrapperDeps(bind);
  });
}

/**
 * The cloud module: MetadataAPI from the node's cloud registry entry (its adapter is imported on
 * first use) and the Issuer of the node's variant from the variant registry, both singletons.
 */
export function cloudModule(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<MetadataAPI>(MetadataAPI)
      .toResolvedValue(
        (c: NodeConfig, logger: Logger) =>
          cloudEntry(c.csp).metadataApi({ csp: c.csp, metadata: c.metadata }, logger),
        [NodeConfig, Logger],
      )
      .inSingletonScope();
    bind<Issuer>(Issuer)
      .toResolvedValue(
        (c: NodeConfig, tpm: Tpm) => variantEntry(c.variant).issuer({ config: c, tpm }),
        [NodeConfig, Tpm],
      )
      .inSingletonScope();
  });
}

/** Clock, randomness, logging. */
function bindSystem(bind: Bind): void {
  bind<Clock>(Clock)
    .toResolvedValue(() => new SystemClock())
    .inSingletonScope();
  bind<Random>(Random)
    .toResolvedValue(() => new CryptoRandom())
    .inSingletonScope();
  bind<RingLogCollector>(LogRing)
    .toResolvedValue(() => new RingLogCollector())
    .inSingletonScope();
  bind<Logger>(Logger)
    .toResolvedValue(
      (ring: RingLogCollector, c: NodeConfig) =>
        ring.tee(createPinoLogger({ level: c.logLevel, base: { component: 'bootstrapper', csp: c.csp } })),
      [LogRing, NodeConfig],
    )
    .inSingletonScope();
  bind<LogCollector>(LogCollector)
    .toResolvedValue((ring: RingLogCollector) => ring, [LogRing])
    .inSingletonScope();
  // Emergency SSH: the host key sshd uses, if the node has one (a missing file means no SSH).
  bind<SshHostKey>(SshHostKey)
    .toResolvedValue(() => new OpenSshHostKeyFile())
    .inSingletonScope();
}

/** The TPM, the PCR 15 marker and the node lock; the state disk, files and node state. */
function bindTpmAndDisk(bind: Bind): void {
  bind<Tpm>(Tpm)
    .toResolvedValue(
      (c: NodeConfig) =>
        new Tpm2ToolsTpm({
          tcti: c.tcti,
          // The cloud's way of provisioning the AK (cloud registry), then the node's own handle.
          ...cloudEntry(c.csp).tpm,
          ...(c.akHandle === undefined ? {} : { akHandle: c.akHandle }),
        }),
      [NodeConfig],
    )
    .inSingletonScope();
  bind<NodeMarker>(NodeMarker)
    .toResolvedValue((tpm: Tpm) => new Pcr15Marker(tpm), [Tpm])
    .inSingletonScope();
  bind<NodeLock>(SharedNodeLock)
    .toResolvedValue((marker: NodeMarker) => new NodeLock(marker), [NodeMarker])
    .inSingletonScope();

  bind<EncryptedDisk>(EncryptedDisk)
    .toResolvedValue(
      (c: NodeConfig) =>
        new CryptsetupDisk({
          devicePath: c.diskDevice,
          ...(c.initialPassphrasePath === undefined
            ? {}
            : { initialPassphrasePath: c.initialPassphrasePath }),
        }),
      [NodeConfig],
    )
    .inSingletonScope();
  bind<FileWriter>(FileWriter)
    .toResolvedValue(() => new ExclusiveFileWriter())
    .inSingletonScope();
  bind<NodeStateStore>(NodeStateStore)
    .toResolvedValue(
      (c: NodeConfig, files: FileWriter) =>
        new JsonNodeStateStore({ path: c.paths.nodeState, fileWriter: files }),
      [NodeConfig, FileWriter],
    )
    .inSingletonScope();
}

/** CSRs, the init secret check, the cluster KMS, kubeadm and the join client. */
function bindCluster(bind: Bind): void {
  bind<CsrFactory>(CsrFactory)
    .toResolvedValue(() => new X509CsrFactory())
    .inSingletonScope();
  bind<SecretHash>(SecretHash)
    .toResolvedValue(() => new BcryptSecretHash())
    .inSingletonScope();
  bind<KmsFactory>(KmsFactory)
    .toResolvedValue(() => new ClusterKmsFactory())
    .inSingletonScope();

  bind<ClusterJoiner>(ClusterJoiner)
    .toResolvedValue(
      (c: NodeConfig, logger: Logger) =>
        new KubeadmJoiner({
          ...(c.kubeadmPath === undefined ? {} : { kubeadmPath: c.kubeadmPath }),
          kubeletBootstrapKeyPath: KUBELET_BOOTSTRAP_KEY_PATH,
          logger,
          componentInstaller: new HttpComponentInstaller({ logger }),
        }),
      [NodeConfig, Logger],
    )
    .inSingletonScope();
  bind<ClusterInitializer>(ClusterInitializer)
    .toResolvedValue(
      (c: NodeConfig, logger: Logger) =>
        new KubeadmInitializer({
          ...(c.kubeadmPath === undefined ? {} : { kubeadmPath: c.kubeadmPath }),
          logger,
          componentInstaller: new HttpComponentInstaller({ logger }),
        }),
      [NodeConfig, Logger],
    )
    .inSingletonScope();
  bind<JoinTicketClient>(JoinTicketClient)
    .toResolvedValue(
      (issuer: Issuer, clock: Clock, logger: Logger) => new GrpcJoinTicketClient({ issuer, clock, logger }),
      [Issuer, Clock, Logger],
    )
    .inSingletonScope();
}

/** Everything `startBootstrapperNode` needs, as one object. */
function bindBootstrapperDeps(bind: Bind): void {
  bind<BootstrapperNodeDeps>(BootstrapperDeps)
    .toResolvedValue(
      (
        metadata: MetadataAPI,
        issuer: Issuer,
        marker: NodeMarker,
        lock: NodeLock,
        disk: EncryptedDisk,
        csrFactory: CsrFactory,
        joinClient: JoinTicketClient,
        files: FileWriter,
        nodeState: NodeStateStore,
        joiner: ClusterJoiner,
        initializer: ClusterInitializer,
        kmsFactory: KmsFactory,
        secretHash: SecretHash,
        logCollector: LogCollector,
        clock: Clock,
        random: Random,
        logger: Logger,
        sshHostKey: SshHostKey,
      ) => ({
        metadata,
        issuer,
        marker,
        lock,
        disk,
        csrFactory,
        joinClient,
        files,
        nodeState,
        joiner,
        initializer,
        kmsFactory,
        secretHash,
        logCollector,
        clock,
        random,
        logger,
        sshHostKey,
      }),
      [
        MetadataAPI,
        Issuer,
        NodeMarker,
        SharedNodeLock,
        EncryptedDisk,
        CsrFactory,
        JoinTicketClient,
        FileWriter,
        NodeStateStore,
        ClusterJoiner,
        ClusterInitializer,
        KmsFactory,
        SecretHash,
        LogCollector,
        Clock,
        Random,
        Logger,
        SshHostKey,
      ],
    )
    .inSingletonScope();
}
