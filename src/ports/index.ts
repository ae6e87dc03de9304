/**
 * The seams of confboot: one interface and DI token per file, and the words domain and adapters
 * share (errors, Kubernetes node names, peer addresses). Exported as `confboot/ports`.
 */

export * from './ak-registry.js';
export * from './amd-cert-fetcher.js';
export * from './ami-tpm-support.js';
export * from './bootstrap-tokens.js';
export * from './certificate-authority.js';
export * from './clock.js';
export * from './cluster-facts.js';
export * from './cluster-initializer.js';
export * from './cluster-joiner.js';
export * from './cluster-nodes.js';
export * from './component-installer.js';
export * from './confidential-guest-device.js';
export * from './csr-factory.js';
export * from './deny-list.js';
export * from './disk-binding-records.js';
export * from './disk-bindings.js';
export * from './encrypted-disk.js';
export * from './errors.js';
export * from './event-recorder.js';
export * from './evidence-store.js';
export * from './file-writer.js';
export * from './gce-shielded-identity.js';
export * from './issuer.js';
export * from './join-call.js';
export * from './join-metrics.js';
export * from './join-ticket-client.js';
export * from './joining-nodes.js';
export * from './kms.js';
export * from './kms-factory.js';
export * from './kubelet-csrs.js';
export * from './kubelet-service.js';
export * from './kubernetes-node.js';
export * from './log-collector.js';
export * from './logger.js';
export * from './measurement-policy.js';
export * from './metadata-api.js';
export * from './nitrotpm-attestor.js';
export * from './node-marker.js';
export * from './node-state-store.js';
export * from './peer-address.js';
export * from './peer-identity.js';
export * from './random.js';
export * from './rate-limit.js';
export * from './receipt-signer.js';
export * from './recovery-endpoint.js';
export * from './request-slots.js';
export * from './secret-hash.js';
export * from './secret-sharing.js';
export * from './state-disk-setup.js';
export * from './tpm.js';
export * from './types.js';
export * from './validator.js';
export * from './variant.js';
