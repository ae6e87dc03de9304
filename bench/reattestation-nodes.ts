/**
 * The node side of the re-attestation benchmark (bench/, outside the product; a child process run by
 * bench/reattestation.ts from the transpiled tree of scripts/bench.mjs, so the nodes' quoting never
 * counts as the operator's CPU): one soft TPM (genuine TPM quote structures, RSA-2048 attestation
 * key) with the PCRs of a joined node, and the real verification service (domain bounds, HTTP edge)
 * on each of the given loopback addresses, all on one port. Reads its configuration
 * ({@link NodesConfig}) as the first line on stdin, prints `{"ready":true,"akPublic":…}` once every
 * service listens, and stops when stdin closes.
 */
import { createInterface } from 'node:readline';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import { startVerificationService } from '../src/app/verification-service/serve.js';
import type { Logger } from '../src/ports/logger.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../test/support/soft-tpm.js';

/** What the parent passes. */
export interface NodesConfig {
  addresses: string[];
  port: number;
  /** PCR index → hex value of the SHA-256 bank. */
  pcrs: Record<string, string>;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => silent };

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('reattestation-nodes: no configuration on stdin');
  const config = JSON.parse(first.value) as NodesConfig;
  const tpm = SoftTpm.create({ banks: [SHA256] });
  for (const [i, hex] of Object.entries(config.pcrs)) tpm.setPcr(SHA256, Number(i), Buffer.from(hex, 'hex'));
  const issuer = new SoftVtpmIssuer(tpm, 'qemu-vtpm');
  const clock = new SystemClock();
  const servers = [];
  for (const host of config.addresses)
    servers.push(
      await startVerificationService(
        { issuer, clock, logger: silent },
        { listen: { host, port: config.port } },
      ),
    );
  process.stdout.write(
    `${JSON.stringify({ ready: true, akPublic: Buffer.from(tpm.akPublic).toString('base64') })}\n`,
  );
  // Runs until the parent closes stdin.
  for await (const _ of { [Symbol.asyncIterator]: () => lines }) {
  }
  for (const s of servers) await s.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`reattestation-nodes: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
