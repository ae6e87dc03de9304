/**
 * The shape every contract suite takes (modelled on abstract-level's and keyv's suites): a factory
 * returns a fresh, isolated subject, a `seed` to put it into a known state, a `cleanup`, and a
 * `supports` object that is the only way to skip optional behaviour.
 */
import { afterEach } from 'vitest';

/** What a contract suite's factory returns. */
export interface ContractSubject<S, Seed, Supports extends object = Record<string, boolean>> {
  /** The implementation under test, fresh for each test. */
  subject: S;
  /** Puts the world behind the subject into the state the suite asks for (e.g. instances in a fake cloud). */
  seed: Seed;
  /** Releases everything the factory created (servers, temp dirs, processes). */
  cleanup: () => Promise<void>;
  /** Optional behaviour this implementation has. */
  supports: Supports;
}

/** A factory for a contract suite; called once per test. */
export type ContractFactory<S, Seed, Supports extends object = Record<string, boolean>> = () => Promise<
  ContractSubject<S, Seed, Supports>
>;

/**
 * For use inside a suite's `describe`: returns `fresh()`, which calls `factory` for the running test,
 * and registers an `afterEach` that cleans up the subject the test made (if it made one).
 */
export function freshSubjects<Subject extends { cleanup: () => Promise<void> }>(
  factory: () => Promise<Subject>,
): () => Promise<Subject> {
  let current: Subject | undefined;
  afterEach(async () => {
    const done = current;
    current = undefined;
    await done?.cleanup();
  });
  return async () => {
    current = await factory();
    return current;
  };
}
