/**
 * The order in which vitest starts test files (vitest.config.ts): the scenarios on real VMs first,
 * in the order below, then vitest's own order. Each of them runs for minutes where every other file
 * takes seconds, and a fresh clone has no vitest timing cache, so vitest's default order (larger
 * files first) started them mid-run and the last one to start became the run's tail on 2 workers.
 * Measured on a fresh clone (`.ci/run`, 2026-11-26): the run took 990 s while its files' own
 * durations add up to 1,667 s, 834 s per worker.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files that run for minutes, in the order they start (their durations in a fresh-clone
 * `.ci/run` on 2026-11-26 at 21:25, two at a time; 761 s in all). Three fresh-clone runs that
 * evening took 761, 810 (`upgrade` started before `ha`) and 835 s (this order again): the spread
 * between runs is larger than what the order of these four changes.
 */
export const LONG_RUNNING_TEST_FILES: readonly string[] = [
  'test/testbed/mini/lifecycle.test.ts', // 457 s; 733 s in the fresh-clone run of 2026-12-07 18:06
  'test/testbed/mini/ha.test.ts', // 288 s; 411 s
  'test/testbed/mini/upgrade.test.ts', // 374 s; 497 s
  // mini-up.test.ts runs only with CONFBOOT_MINI_ALL=1 (lifecycle forms its cluster the same way).
];

/** {@link BaseSequencer}'s order with {@link LONG_RUNNING_TEST_FILES} moved to the front. */
export class LongRunningFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const i = LONG_RUNNING_TEST_FILES.findIndex((p) => file.moduleId.endsWith(`/${p}`));
      return i === -1 ? LONG_RUNNING_TEST_FILES.length : i;
    };
    return sorted
      .map((file, index) => ({ file, index }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}
