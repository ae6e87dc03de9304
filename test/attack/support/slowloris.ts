/**
 * A slowloris attacker for the attack suite, in a worker thread (its own event loop, like a
 * separate machine's client): it keeps `perAddress` connections open from each of `addresses`
 * (127.0.0.x loopback, through `localAddress`) and re-opens every connection the server closes or
 * refuses, at once, until stopped. Each connection stays silent after its stage:
 * - `tcp`: a TCP connection, no byte sent;
 * - `hello`: a genuine TLS 1.3 ClientHello (captured once from node:tls), then nothing;
 * - `tls`: a complete TLS 1.3 handshake (ALPN h2, no client certificate), then nothing.
 * Test code only.
 */
import { Worker } from 'node:worker_threads';

/** What the attacker holds. */
export type SilentStage = 'tcp' | 'hello' | 'tls';

/** Counters of the attacker. */
export interface SlowlorisStats {
  /** Connections open now that reached their stage (connected / hello sent / handshake done). */
  held: number;
  /** Connections opened in total (first opens and re-opens). */
  opened: number;
  /** Connections the server closed or refused (each was re-opened). */
  closedByServer: number;
  /** Whether the attack is still going (false once stopped). */
  running: boolean;
}

/** Options of {@link startSlowloris}. */
export interface SlowlorisOptions {
  port: number;
  stage: SilentStage;
  /** Source addresses (127.0.0.0/8). */
  addresses: string[];
  perAddress: number;
  /** Do not re-open closed connections (a flood that opens once). */
  once?: boolean;
}

/** A running attacker. */
export interface Slowloris {
  stats(): Promise<SlowlorisStats>;
  /** Resolves once `held` ≥ `n` (bounded: `maxMs`, default 60 s). */
  untilHeld(n: number, maxMs?: number): Promise<SlowlorisStats>;
  /** Closes every connection and ends the worker; resolves with the final counters. */
  stop(): Promise<SlowlorisStats>;
}

const WORKER = `
const net = require('node:net');
const tls = require('node:tls');
const { parentPort, workerData } = require('node:worker_threads');
const { port, stage, addresses, perAddress, once } = workerData;
const sockets = new Set();
let held = 0, opened = 0, closedByServer = 0, running = true, hello;

function captureHello() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer((s) => s.once('data', (d) => { resolve(d); s.destroy(); srv.close(); }));
    srv.listen(0, '127.0.0.1', () => {
      const c = tls.connect({ port: srv.address().port, host: '127.0.0.1', minVersion: 'TLSv1.3',
        ALPNProtocols: ['h2'], rejectUnauthorized: false });
      c.on('error', () => {});
    });
    srv.on('error', reject);
  });
}

function open(localAddress) {
  if (!running) return;
  opened++;
  let reached = false;
  const reach = () => { if (!reached) { reached = true; held++; } };
  const raw = net.connect({ port, host: '127.0.0.1', localAddress });
  let sock = raw;
  raw.on('error', () => {});
  if (stage === 'tls') {
    sock = tls.connect({ socket: raw, minVersion: 'TLSv1.3', ALPNProtocols: ['h2'], rejectUnauthorized: false });
    sock.on('error', () => {});
    sock.once('secureConnect', reach);
  } else {
    raw.once('connect', () => {
      if (stage === 'hello') raw.write(hello);
      reach();
    });
  }
  // Read and discard whatever the server sends (its TLS flight, frames): stay silent.
  sock.on('data', () => {});
  sockets.add(sock);
  sock.once('close', () => {
    sockets.delete(sock);
    if (reached) held--;
    if (!running) return;
    closedByServer++;
    if (!once) setImmediate(() => open(localAddress));
  });
}

(async () => {
  if (stage === 'hello') hello = await captureHello();
  for (let i = 0; i < perAddress; i++) for (const a of addresses) open(a);
})();

parentPort.on('message', (m) => {
  if (m === 'stop') {
    running = false;
    for (const s of sockets) s.destroy();
    parentPort.postMessage({ id: 'stop', held: 0, opened, closedByServer, running });
    setImmediate(() => process.exit(0));
    return;
  }
  parentPort.postMessage({ id: m, held, opened, closedByServer, running });
});
`;

/** Starts the attacker; its first connections open at once. */
export function startSlowloris(options: SlowlorisOptions): Slowloris {
  const worker = new Worker(WORKER, { eval: true, workerData: options });
  worker.unref();
  let seq = 0;
  const ask = (msg: string): Promise<SlowlorisStats> =>
    new Promise((resolve, reject) => {
      const id = msg === 'stop' ? 'stop' : `${msg}-${seq++}`;
      const onMessage = (m: SlowlorisStats & { id: string }) => {
        if (m.id !== id) return;
        worker.off('message', onMessage);
        worker.off('error', onError);
        const { id: _id, ...stats } = m;
        resolve(stats);
      };
      // Removed with the answer: untilHeld asks every 50 ms, and a listener left per question made
      // Node warn of a listener leak on the worker.
      const onError = (err: Error) => {
        worker.off('message', onMessage);
        reject(err);
      };
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.postMessage(id);
    });
  let stopped: Promise<SlowlorisStats> | undefined;
  return {
    stats: () => ask('stats'),
    async untilHeld(n, maxMs = 60_000) {
      const end = Date.now() + maxMs;
      for (;;) {
        const s = await ask('stats');
        if (s.held >= n) return s;
        if (Date.now() > end) throw new Error(`slowloris: only ${s.held} of ${n} connections held`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop() {
      stopped ??= ask('stop').then(async (s) => {
        await new Promise<void>((r) => {
          worker.once('exit', () => r());
          setTimeout(r, 2_000).unref();
        });
        return s;
      });
      return stopped;
    },
  };
}

/** `count` loopback addresses 127.0.<1+i/250>.<1+i%250>, away from the suite's nodes on 127.0.0.x. */
export function loopbackAddresses(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`);
}
