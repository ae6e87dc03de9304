/**
 * `confboot attestation <verb>`: offline verification of attestation evidence. Each verb lives in
 * its own module and is loaded only when used.
 */
import type { CommandSpec } from '../program/args.js';
import type { CommandModule } from './command.js';
import { runVerb, type Verb } from './verbs.js';

const LAZY_VERBS: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
  verify: {
    summary: 'verify a vTPM attestation document (upstream JSON or go-tpm-tools protobuf)',
    load: () => import('./attestation-verify.js'),
  },
  'verify-snp': {
    summary: 'verify an AMD SEV-SNP report and its VCEK/VLEK chain',
    load: () => import('./attestation-verify-snp.js'),
  },
  'verify-tdx': {
    summary: 'verify an Intel TDX quote, its PCK chain and collateral',
    load: () => import('./attestation-verify-tdx.js'),
  },
  'verify-nitrotpm': {
    summary: 'verify an AWS NitroTPM attestation document and its chain to the AWS Nitro root',
    load: () => import('./attestation-verify-nitrotpm.js'),
  },
};

/** Each verb's module is imported only when that verb runs. */
const VERBS: Record<string, Verb> = Object.fromEntries(
  Object.entries(LAZY_VERBS).map(([name, v]) => [
    name,
    { summary: v.summary, run: async (argv: string[]) => (await v.load()).run(argv) },
  ]),
);

export function run(argv: string[]): Promise<number> {
  return runVerb('attestation', VERBS, argv, ['Exit codes: 0 accepted, 1 rejected, 2 usage or input error.']);
}

/** Every verb's option table (loads each verb's module). */
export async function loadCommandSpecs(): Promise<readonly CommandSpec[]> {
  const specs: CommandSpec[] = [];
  for (const v of Object.values(LAZY_VERBS)) specs.push(...((await v.load()).commandSpecs ?? []));
  return specs;
}
