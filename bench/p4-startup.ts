/**
 * P4 (issue 7): join service start-to-listening time divided by `node -e 0`, both as child
 * processes, median of several runs, interleaved. "Start" is right before spawn; "listening" is
 * when this process reads the service's listening line (bench/join-service-process.ts) or, for the
 * production CLI, its "Join service listening" log line. `node -e 0` is spawn to exit.
 * The production CLI (`confboot join-service`, src/app/cli/join-service.ts, through
 * bench/cli-process.ts) is measured too when it exists in the tree: it loads the Kubernetes client
 * and reads a kubeconfig (the simulated admin.conf; nothing is contacted at start).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildDir, type ServiceProcess, spawnCli, spawnJoinService } from './child.js';
import type { BenchCluster } from './fixture.js';
import { quantile } from './fixture.js';

/** Result of {@link benchP4}; times in milliseconds (medians). */
export interface P4Result {
  runs: number;
  nodeMs: number;
  /** The benchmark service program (simulated Kubernetes), as used by P2 and P3. */
  serviceMs: number;
  ratio: number;
  /** The production CLI, when present in the tree. */
  cliMs?: number;
  cliRatio?: number;
}

function nodeNoop(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve(performance.now() - t));
  });
}

async function timeService(start: () => ServiceProcess): Promise<number> {
  const service = start();
  let ms: number;
  try {
    const { seenAt } = await service.listening;
    ms = seenAt - service.spawnedAt;
  } catch (err) {
    await service.stop();
    throw err;
  }
  const code = await service.stop();
  if (code !== 0) throw new Error(`join service exited with ${code} after SIGTERM`);
  return ms;
}

/** Measures P4 with `runs` runs of each (interleaved). */
export async function benchP4(cluster: BenchCluster, logDir: string, runs: number): Promise<P4Result> {
  const build = buildDir();
  const hasCli = existsSync(join(build, 'src', 'app', 'cli', 'join-service.js'));
  const startCli = () =>
    spawnCli(
      'src/app/cli/join-service.js',
      'runJoinService',
      cliArgs,
      join(logDir, 'p4-cli-join-service.log'),
    );
  const cliArgs = [
    '--csp',
    'qemu',
    '--attestation-variant',
    'qemu-vtpm',
    '--attestation-config',
    cluster.attestationConfigPath,
    '--measurement-salt-file',
    cluster.measurementSaltPath,
    '--key-service-endpoint',
    cluster.keyServiceEndpoint,
    '--listen',
    '127.0.0.1:0',
    '--http-listen',
    '127.0.0.1:0',
    '--kubeconfig',
    cluster.adminConfPath,
    '--admin-conf',
    cluster.adminConfPath,
    '--pki-dir',
    cluster.pkiDir,
    '--api-server-endpoint',
    '10.0.0.1:6443',
    // The benchmark's nodes quote with software TPMs whose AKs are registered nowhere.
    '--trust-ak-as-carried',
  ];
  const node: number[] = [];
  const service: number[] = [];
  const cli: number[] = [];
  // One untimed run of each warms the page cache.
  await nodeNoop();
  await timeService(() => spawnJoinService(cluster.serviceConfig(0), join(logDir, 'p4-join-service.log')));
  if (hasCli) await timeService(startCli);
  for (let i = 0; i < runs; i++) {
    node.push(await nodeNoop());
    service.push(
      await timeService(() =>
        spawnJoinService(cluster.serviceConfig(0), join(logDir, 'p4-join-service.log')),
      ),
    );
    if (hasCli) cli.push(await timeService(startCli));
  }
  const nodeMs = quantile(node, 0.5);
  const serviceMs = quantile(service, 0.5);
  return {
    runs,
    nodeMs,
    serviceMs,
    ratio: serviceMs / nodeMs,
    ...(hasCli ? { cliMs: quantile(cli, 0.5), cliRatio: quantile(cli, 0.5) / nodeMs } : {}),
  };
}
