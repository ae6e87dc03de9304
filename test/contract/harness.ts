/**
 * The shape every contract suite takes (STYLE.md example 9, after abstract-level and keyv): a factory
 * returns a fresh, isolated subject, a `seed` to put it into a known state, a `cleanup`, and a
 * `supports` object that is the only way to skip optional behaviour.
 */

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
