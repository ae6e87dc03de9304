/** The reference fake runs the MetadataAPI contract first (in memory, no cloud). */
import { describeMetadataApiContract } from '../contract/metadata-api.js';
import { FakeMetadataAPI } from './fake-metadata-api.js';

describeMetadataApiContract('FakeMetadataAPI (in-memory reference)', async () => {
  const fake = new FakeMetadataAPI();
  return {
    subject: fake,
    seed: {
      world: async (w) => fake.setWorld(w),
      failNextRequest: async () => fake.failNext(),
      stallNextRequest: async () => fake.stallNext(),
    },
    cleanup: async () => {},
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});
