#!/usr/bin/env node
/**
 * The Azure node entrypoint (app layer): the bootstrapper program with the azure module fixed, so this
 * process can only ever load the azure adapter (and, lazily, its SDK). Flags: see
 * `--help` (`--attestation-variant`, `--tcti`, `--disk`, `--init-listen`, `--log-level`,
 * `--check-wiring`, …).
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runBootstrapper } from '../cli/bootstrapper.js';

/** Runs the Azure bootstrapper with `argv` (without node and script); resolves to the exit code. */
export function main(argv: string[]): Promise<number> {
  return runBootstrapper(argv, 'azure');
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
