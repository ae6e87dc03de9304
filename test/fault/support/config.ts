/**
 * Size of the fault-injection suite. The default run is small enough for CI (the whole folder well
 * under 90 s on two busy cores); `CONFBOOT_FAULT_LONG=1` runs the long variant: more nodes per
 * burst and repeated faults (see test/fault/README.md).
 */

/** True when the long variant was asked for. */
export const LONG = process.env.CONFBOOT_FAULT_LONG === '1';

/** Nodes in a burst. */
export const BURST_NODES = LONG ? 16 : 5;

/** How many times a service goes away during one burst. */
export const OUTAGES = LONG ? 3 : 1;

/** Bound on any single wait in the suite (never a timing assertion, only a hang guard). */
export const WAIT_MS = LONG ? 240_000 : 45_000;

/** Per-test bound given to vitest. */
export const TEST_MS = LONG ? 600_000 : 90_000;

/** Prints one summary line per scenario (counts, not timings) when `CONFBOOT_FAULT_REPORT=1`. */
export function report(line: string): void {
  if (process.env.CONFBOOT_FAULT_REPORT === '1') console.info(`[fault] ${line}`);
}
