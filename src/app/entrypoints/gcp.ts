#!/usr/bin/env node
/**
 * The GCP node entrypoint (app layer): the bootstrapper program with the gcp module fixed, so this
 * process can only ever load the gcp adapter (and, lazily, its SDK). Flags: see
 * `--help` (`--attestation-variant`, `--tcti`, `--disk`, `--init-listen`, `--log-level`,
 * `--check-wiring`, …).
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runBootstrapper } from '../cli/bootstrapper.js';

/** Runs the GCP bootstrapper with `argv` (without node and script); resolves to the exit code. */
export function main(argv: string[]): Promise<number> {
  return runBootstrapper(argv, 'gcp');
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
