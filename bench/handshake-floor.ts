/**
 * The TLS part of P8's floor (bench/, outside the product): the server side's CPU for one mutual-TLS
 * 1.3 handshake with ECDSA P-256 certificates (a CA, a server and a client certificate from P1's
 * material; the server requires the client's and checks it against the CA), on loopback, with
 * node:tls's default key-exchange groups, as the attested listener uses them. The server runs in
 * this process and does nothing else meanwhile; the client runs in its own process (a child on the
 * same node binary), so this process's CPU (process.cpuUsage: every thread, user + system) over the
 * timed handshakes is the server side's alone: accept, handshake, the client certificate check and
 * the close. A warm-up the client runs first is not counted. The client closes only after the
 * server did, and every timed handshake must have completed on the server (until 2026-11-26 the
 * client reset the connection right after its own handshake, so the server never read the client's
 * certificate and Finished, and the floor counted about two thirds of a handshake).
 */
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { createServer } from 'node:tls';
import { mtlsMaterial, startMtlsServer } from './p1-throughput.js';

/** What one server-side operation cost, timed by {@link timeServerSide}. */
interface ServerSideCost {
  concurrency: number;
  /** Server-side CPU per operation (µs). */
  cpuUs: number;
  /** Server event-loop busy time per operation (µs). */
  busyUs: number;
  /** Wall time per operation at this concurrency (µs). */
  wallUs: number;
}

/** Result of {@link benchHandshakeFloor}. */
export interface HandshakeFloor extends ServerSideCost {
  handshakes: number;
  /** Key-exchange group of the last handshake (e.g. X25519MLKEM768 with OpenSSL 3.5). */
  group: string;
}

/**
 * A client program for {@link timeServerSide}: `setup` (ES module code after the imports it names)
 * defines `once()`, one operation; the program runs the warm-up, prints "warm" and the value of the
 * expression `info`, waits for a line on stdin, runs the timed operations `concurrency` at a time and
 * prints "done".
 */
function clientProgram(imports: string, setup: string, info: string): string {
  return `${imports}
import { createInterface } from 'node:readline';
const { port, ca, key, cert, warm, count, concurrency } = JSON.parse(process.env.CONFBOOT_FLOOR);
${setup}
const run = async (n) => {
  let left = n;
  await Promise.all(Array.from({ length: concurrency }, async () => { while (left-- > 0) await once(); }));
};
await run(warm);
process.stdout.write('warm\\n' + ${info} + '\\n');
await new Promise((r) => createInterface({ input: process.stdin }).once('line', r));
await run(count);
process.stdout.write('done\\n');
`;
}

/** The handshake client: one operation is a TLS connection closed after the server closed it. */
const CLIENT = clientProgram(
  "import { connect } from 'node:tls';",
  `let group = 'unknown';
const once = () => new Promise((resolve, reject) => {
  const s = connect({ host: '127.0.0.1', port, ca, key, cert, minVersion: 'TLSv1.3', servername: '127.0.0.1' }, () => {
    group = s.getEphemeralKeyInfo()?.name ?? group;
    // Wait for the server's close: destroying here would reset the connection before the server
    // read our certificate and Finished, and its handshake would never complete.
    s.once('close', () => resolve());
    s.end();
  });
  s.on('data', () => {});
  s.once('error', reject);
});`,
  'group',
);

/** Times `count` server-side handshakes (client in a child process, `concurrency` at a time). */
export async function benchHandshakeFloor(count = 400, concurrency = 4): Promise<HandshakeFloor> {
  const material = await mtlsMaterial();
  /** Server-side handshakes that completed (the client's certificate and Finished were read). */
  let completed = 0;
  const server = createServer(
    {
      ca: material.caPem,
      cert: material.server[0],
      key: material.server[1],
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
    },
    (socket) => {
      completed++;
      socket.on('error', () => {});
      socket.end();
    },
  );
  server.on('tlsClientError', () => {});
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    const timed = await timeServerSide(
      CLIENT,
      { port, ca: material.caPem, cert: material.client[0], key: material.client[1] },
      { count, concurrency, completed: () => completed, what: 'handshake' },
    );
    return { handshakes: count, concurrency, ...timed, group: timed.info };
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}

/** Result of {@link benchGrpcCallFloor}: the cost per call, the handshake included. */
export interface GrpcCallFloor extends ServerSideCost {
  calls: number;
}

/**
 * The client process of {@link benchGrpcCallFloor}: unary calls, each on a new channel of its own
 * (`grpc.use_local_subchannel_pool`, closed after the answer), as P1's baseline makes them.
 */
const GRPC_CLIENT = clientProgram(
  "import { credentials, makeGenericClientConstructor, Metadata } from '@grpc/grpc-js';",
  `const id = (b) => b;
const Client = makeGenericClientConstructor({ IssueJoinTicket: { path: '/join.API/IssueJoinTicket',
  requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id,
  responseSerialize: id, responseDeserialize: id } }, 'join.API');
const creds = credentials.createSsl(Buffer.from(ca), Buffer.from(key), Buffer.from(cert));
const once = () => new Promise((resolve, reject) => {
  const c = new Client('127.0.0.1:' + port, creds, { 'grpc.use_local_subchannel_pool': 1 });
  c.IssueJoinTicket(Buffer.alloc(0), new Metadata(), { deadline: Date.now() + 30000 }, (err) => {
    c.close();
    if (err) reject(err); else resolve();
  });
});`,
  "'grpc'",
);

/**
 * A reference for P8 (not part of its floor): the server side's CPU for one plain grpc-js unary call
 * with mutual TLS on a fresh connection (P1's baseline server: ECDSA P-256 certificates, the client's
 * required, a join.API handler that answers at once, channelz off as in the join service), client in
 * a child process as for
 * {@link benchHandshakeFloor}. Minus the handshake floor, it is what HTTP/2 and gRPC add to a
 * connection that carries one call, with no confboot code on it.
 */
export async function benchGrpcCallFloor(count = 400, concurrency = 4): Promise<GrpcCallFloor> {
  const material = await mtlsMaterial();
  // As the attested server runs it: no channelz registry (src/adapters/grpc/attested-server.ts).
  const server = await startMtlsServer(material, { 'grpc.enable_channelz': 0 });
  try {
    const timed = await timeServerSide(
      GRPC_CLIENT,
      { port: server.port, ca: material.caPem, cert: material.client[0], key: material.client[1] },
      { count, concurrency, completed: server.answered, what: 'gRPC call' },
    );
    return { calls: count, concurrency, cpuUs: timed.cpuUs, busyUs: timed.busyUs, wallUs: timed.wallUs };
  } finally {
    await server.stop();
  }
}

/**
 * Runs `client` (an ES module) in a child process on this node binary: it does a warm-up, prints
 * "warm" and one line of information, waits for a line on stdin, does `count` operations
 * `concurrency` at a time and prints "done". Returns this process's CPU, event-loop busy time and
 * wall time per operation over the timed part; fails unless `completed()` (the server's count of
 * finished operations) grew by exactly `count`.
 */
async function timeServerSide(
  client: string,
  env: Record<string, unknown>,
  options: { count: number; concurrency: number; completed: () => number; what: string },
): Promise<{ cpuUs: number; busyUs: number; wallUs: number; info: string }> {
  const { count, concurrency, completed, what } = options;
  const child = spawn(process.execPath, ['--input-type=module', '-e', client], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: {
      ...process.env,
      CONFBOOT_FLOOR: JSON.stringify({ ...env, warm: Math.max(20, count / 10), count, concurrency }),
    },
  });
  const lines = createInterface({ input: child.stdout });
  const seen: string[] = [];
  let wake = () => {};
  lines.on('line', (line) => {
    seen.push(line);
    wake();
  });
  // Resolves with the line after `want` ('' when none follows yet), bounded by 120 s.
  const next = (want: string) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} client: no "${want}" after 120 s`)), 120_000);
      const check = () => {
        const i = seen.indexOf(want);
        if (i < 0 || (want === 'warm' && seen.length < i + 2)) return;
        clearTimeout(timer);
        resolve(seen[i + 1] ?? '');
      };
      wake = check;
      check();
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${what} client exited with ${code} before "${want}"`));
      });
    });
  try {
    const info = await next('warm');
    const completedBefore = completed();
    const cpu = process.cpuUsage();
    const elu = performance.eventLoopUtilization();
    const started = performance.now();
    const done = next('done');
    child.stdin.write('go\n');
    await done;
    const wallUs = ((performance.now() - started) * 1000) / count;
    const used = process.cpuUsage(cpu);
    const busy = performance.eventLoopUtilization(elu);
    if (completed() - completedBefore !== count)
      throw new Error(`${what} floor: ${completed() - completedBefore} of ${count} completed on the server`);
    return {
      cpuUs: (used.user + used.system) / count,
      busyUs: (busy.active * 1000) / count,
      wallUs,
      info,
    };
  } finally {
    child.kill();
  }
}
