/**
 * `confboot attestation <verb>`: offline verification of attestation evidence. Each verb lives in
 * its own module and is loaded only when used.
 */
import type { CommandModule } from './command.js';

const VERBS: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
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
};

function usage(): string {
  const width = Math.max(...Object.keys(VERBS).map((v) => v.length));
  return [
    'Usage: confboot attestation <verb> [options]',
    '',
    'Verbs:',
    ...Object.entries(VERBS).map(([v, d]) => `  ${v.padEnd(width)}  ${d.summary}`),
    '',
    'Run `confboot attestation <verb> --help` for its options.',
    'Exit codes: 0 accepted, 1 rejected, 2 usage or input error.',
  ].join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === '--help' || verb === '-h') {
    process.stdout.write(`${usage()}\n`);
    return verb === undefined ? 2 : 0;
  }
  const entry = VERBS[verb];
  if (entry === undefined) {
    process.stderr.write(`confboot attestation: unknown verb ${JSON.stringify(verb)}\n\n${usage()}\n`);
    return 2;
  }
  return (await entry.load()).run(rest);
}
