/**
 * vitest configuration of `npm run bench` (scripts/bench.mjs): vitest is only the TypeScript runner
 * here. It includes bench/*.bench-run.ts alone (the root config includes src/, test/ and examples/,
 * so `npm test` never runs a benchmark), runs one file at a time in one fork, and allows long runs.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['bench/**/*.bench-run.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ['default'],
  },
});
