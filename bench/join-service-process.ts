/**
 * The join service as a benchmark child process (bench/, outside the product): P2–P4 spawn it with
 * plain `node` from the transpiled tree (scripts/bench.mjs), so its start-up time and peak RSS are
 * those of one real process. Configuration comes as one JSON argument ({@link BenchServiceConfig}).
 * Logs are pino JSON lines on stderr, as in production. Once listening it prints one JSON line on
 * stdout: `{"listening":true,"grpcPort":…,"httpPort":…,"atMs":<epoch ms>}`. SIGTERM drains and
 * exits 0.
 */
import { createPinoLogger } from '../src/adapters/log/pino-logger.js';
import { type BenchServiceConfig, startBenchJoinService } from './service-wiring.js';

async function main(): Promise<void> {
  const arg = process.argv[2];
  if (arg === undefined) throw new Error('usage: join-service-process <config JSON>');
  const config = JSON.parse(arg) as BenchServiceConfig;
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  process.once('SIGINT', () => stop.abort());
  const logger = createPinoLogger({ base: { component: 'join-service' } });
  const service = await startBenchJoinService(config, logger, stop.signal);
  process.stdout.write(
    `${JSON.stringify({ listening: true, grpcPort: service.grpcPort, httpPort: service.httpPort, atMs: Date.now() })}\n`,
  );
  await service.closed;
}

main().then(
  () => {
    process.exitCode = 0;
  },
  (err: unknown) => {
    process.stderr.write(`join-service-process: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
