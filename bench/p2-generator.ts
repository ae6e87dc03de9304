/**
 * A P2 load-generator child process (bench/, outside the product; run by bench/p2-burst.ts from the
 * transpiled tree of scripts/bench.mjs): reads its configuration ({@link GeneratorConfig}) as the
 * first line on stdin, prepares its share of the simulated nodes, prints `{"ready":true}`, waits for
 * the next line, runs the burst (bench/p2-nodes.ts) and prints its outcome as one JSON line.
 */
import { createInterface } from 'node:readline';
import { prepareNodes, runNodes } from './p2-nodes.js';

/** What the parent passes. */
export interface GeneratorConfig {
  endpoint: string;
  addresses: string[];
  /** Expected PCR values, index → hex. */
  pcrs: Record<string, string>;
  namePrefix: string;
  boundMs: number;
}

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('p2-generator: no configuration on stdin');
  const config = JSON.parse(first.value) as GeneratorConfig;
  const pcrs = new Map<number, Uint8Array>(
    Object.entries(config.pcrs).map(([i, hex]) => [Number(i), new Uint8Array(Buffer.from(hex, 'hex'))]),
  );
  const prepared = await prepareNodes(config.addresses, pcrs, config.namePrefix);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  await lines.next();
  const outcome = await runNodes(prepared, config.endpoint, config.boundMs);
  process.stdout.write(`${JSON.stringify({ outcome })}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`p2-generator: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
