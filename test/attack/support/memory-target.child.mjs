// The join service for the memory attack test, in a process of its own so that its peak RSS is the
// service's alone (the kernel's high-water mark, process.resourceUsage().maxRSS). Runs the BUILT
// code (dist/, `npm run build`) as production does — no TypeScript loader in the process. Same
// wiring as support/target.ts: real attested TLS, the production qemu-vtpm validator with the demo
// image's expected PCRs, the real key service on loopback, the real file CA over a SIMULATED
// kubeadm init, SIMULATED Kubernetes, the real MetadataPeerIdentity over a FAKE cloud listing
// worker-0 on 127.0.0.1. Default limits except the rate limit (off: the attack comes from one IP).
// IPC: sends {ready, endpoint}; answers "usage" with {maxRssKiB, rssBytes, audits}; "stop" exits.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';

const dist = new URL('../../../dist/', import.meta.url);
const load = (p) => import(new URL(p, dist).href);
const [
  { MetadataPeerIdentity },
  { GrpcKmsClient },
  { HkdfKms },
  { startKeyServiceServer },
  { createPinoLogger, silentLogger },
  { FileCertificateAuthority },
  sim,
  { SystemClock },
  { expectedAttestationConfig },
  { validatorBuilder },
  { startJoinService },
  { FakeMetadataAPI },
] = await Promise.all([
  load('src/adapters/identity/metadata-peer-identity.js'),
  load('src/adapters/kms/grpc-kms-client.js'),
  load('src/adapters/kms/hkdf-kms.js'),
  load('src/adapters/kms/key-service-server.js'),
  load('src/adapters/log/pino-logger.js'),
  load('src/adapters/pki/file-certificate-authority.js'),
  load('src/testbed/simulated/simulated-kubernetes.js'),
  load('src/adapters/system/system-clock.js'),
  load('src/testbed/demo/boot-measurements.js'),
  load('src/app/join-service/production.js'),
  load('src/app/join-service/service.js'),
  load('test/fakes/fake-metadata-api.js'),
]);

const dir = mkdtempSync(join(tmpdir(), 'confboot-memory-attack-'));
const clock = new SystemClock();
const audits = [];
const stream = new PassThrough();
stream.on('data', (c) => {
  for (const line of c.toString('utf8').split('\n')) {
    if (!line.includes('"join-audit"')) continue;
    const e = JSON.parse(line);
    audits.push({ rpc: e.rpc, outcome: e.outcome, code: e.code, reason: e.reason });
  }
});
const logger = createPinoLogger({ destination: stream, level: 'info' });
const cp = new sim.SimulatedControlPlane(clock);
const pkiDir = join(dir, 'pki');
await new sim.SimulatedClusterInitializer(cp, {
  pkiDir,
  adminConfPath: join(dir, 'admin.conf'),
  logger: silentLogger,
}).initCluster({
  kubernetesVersion: 'v1.31.0',
  clusterName: 'memory',
  conformanceMode: false,
  components: [],
  apiserverCertSans: [],
  serviceCidr: '10.96.0.0/12',
  nodeName: 'control-plane-0',
  nodeIp: '127.0.0.2',
});
const keyServer = await startKeyServiceServer({
  kms: new HkdfKms(randomBytes(32), randomBytes(32)),
  host: '127.0.0.1',
  port: 0,
  logger: silentLogger,
});
const kms = new GrpcKmsClient({ endpoint: `127.0.0.1:${keyServer.port}`, defaultTimeoutInMs: 5_000 });
const build = validatorBuilder('qemu-vtpm', {}, clock, logger);
const metadata = new FakeMetadataAPI({
  self: { name: 'control-plane-0', role: 'ControlPlane', vpcIp: '127.0.0.2' },
  peers: [{ name: 'worker-0', role: 'Worker', vpcIp: '127.0.0.1' }],
  foreign: [],
  uid: 'memory',
});
const service = await startJoinService({
  validators: [build(new TextEncoder().encode(JSON.stringify(expectedAttestationConfig())))],
  kms,
  ca: new FileCertificateAuthority({ clock, pkiDir }),
  tokens: new sim.InMemoryBootstrapTokens(cp),
  facts: new sim.InMemoryClusterFacts(cp),
  measurementSalt: randomBytes(32),
  apiServerEndpoint: '10.0.0.1:6443',
  identity: new MetadataPeerIdentity(metadata, clock),
  clock,
  logger,
  listen: { host: '127.0.0.1', port: 0 },
  httpListen: { host: '127.0.0.1', port: 0 },
  metrics: { processMetrics: false },
  limits: { ratePerSecond: 0, handshakeTimeoutMs: 20_000 },
});

process.on('message', async (m) => {
  if (m === 'usage') {
    process.send({
      maxRssKiB: process.resourceUsage().maxRSS,
      rssBytes: process.memoryUsage().rss,
      audits: audits.splice(0),
    });
  } else if (m === 'stop') {
    await service.close();
    kms.close();
    await keyServer.shutdown();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }
});
process.send({ ready: true, endpoint: `127.0.0.1:${service.grpcPort}` });
