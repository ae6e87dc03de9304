import { defineConfig } from 'vitest/config';
import { LongRunningFirstSequencer } from './test/support/sequencer.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    // The scenarios on real VMs start first, so none of them is the run's tail (test/support/sequencer.ts).
    sequence: { sequencer: LongRunningFirstSequencer },
  },
});
