/**
 * `confboot bootstrapper --csp C --attestation-variant V …` (app layer, CLI): the bootstrapper
 * program for the cloud named by `--csp`. Only that cloud's module is imported. Exits 0 once the
 * node is bootstrapped (or already was: PCR 15 set), non-zero with the reason after an unrecoverable
 * failure (past the node lock the state disk is then marked for reset).
 */
import { type BootstrapperRunOptions, runBootstrapper } from './bootstrapper-program.js';

/** Runs `confboot bootstrapper`; resolves to the exit code. */
export function run(argv: string[], options: BootstrapperRunOptions = {}): Promise<number> {
  return runBootstrapper(argv, undefined, options);
}
