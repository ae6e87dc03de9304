/**
 * The KMS contract against the in-memory fake (reference), the embedded HKDF KMS, and the gRPC
 * client talking to a real key service on loopback.
 */

import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import type { KMS } from '../../../src/ports/kms.js';
import { describeKmsContract } from '../../contract/kms.js';
import { FakeKms } from '../../fakes/fake-kms.js';

/** Forwards to a replaceable HkdfKms, so the suite can re-key the embedded KMS. */
class Rekeyable implements KMS {
  constructor(public inner: HkdfKms) {}
  getDataKey(...args: Parameters<KMS['getDataKey']>) {
    return this.inner.getDataKey(...args);
  }
}

const defaultKms = () => new HkdfKms(new Uint8Array(32).fill(3), new Uint8Array(32).fill(4));

describeKmsContract('FakeKms (in-memory reference)', async () => {
  const subject = new FakeKms();
  return {
    subject,
    seed: { useMasterSecret: async (s, salt) => subject.setMasterSecret(s, salt) },
    cleanup: async () => {},
    supports: {},
  };
});

describeKmsContract('HkdfKms (embedded cluster KMS)', async () => {
  // The suite's subject is the embedded KMS itself; the wrapper only swaps it when re-keyed.
  const holder = new Rekeyable(defaultKms());
  return {
    subject: holder,
    seed: {
      useMasterSecret: async (s, salt) => {
        holder.inner = new HkdfKms(s, salt);
      },
    },
    cleanup: async () => {},
    supports: {},
  };
});

describeKmsContract('GrpcKmsClient against a key service on 127.0.0.1', async () => {
  const holder = new Rekeyable(defaultKms());
  const server = await startKeyServiceServer({
    kms: holder,
    host: '127.0.0.1',
    port: 0,
    logger: silentLogger,
  });
  const subject = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}`, defaultTimeoutInMs: 10_000 });
  return {
    subject,
    seed: {
      useMasterSecret: async (s, salt) => {
        holder.inner = new HkdfKms(s, salt);
      },
    },
    cleanup: async () => {
      subject.close();
      await server.shutdown();
    },
    supports: {},
  };
});
