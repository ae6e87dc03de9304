/**
 * The reference fakes, exported as `confboot/testing`: in-memory implementations of the ports with
 * real behaviour, which the contract suites (`confboot/contract`) run first as their reference.
 * Embedders use them to test their own services without a TPM, a disk, a cloud or a key service.
 * Nothing here imports a test runner.
 */
export { FakeAttestation } from './fake-attestation.js';
export { FakeBootstrapTokens } from './fake-bootstrap-tokens.js';
export { FakeClock } from './fake-clock.js';
export { FakeClusterFacts } from './fake-cluster-facts.js';
export { FakeClusterInitializer } from './fake-cluster-initializer.js';
export { FakeClusterJoiner } from './fake-cluster-joiner.js';
export { FakeEncryptedDisk } from './fake-encrypted-disk.js';
export { FakeFileWriter } from './fake-file-writer.js';
export { FakeJoinTicketClient } from './fake-join-ticket-client.js';
export { FakeKms } from './fake-kms.js';
export { FakeLogger } from './fake-logger.js';
export { FakeMetadataAPI } from './fake-metadata-api.js';
export { FakeNodeMarker } from './fake-node-marker.js';
export { FakeNodeStateStore } from './fake-node-state-store.js';
export { FakeRandom } from './fake-random.js';
export { FakeSecretHash } from './fake-secret-hash.js';
