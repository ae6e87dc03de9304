/**
 * The CA part of P8's floor (bench/, outside the product): one CSR inspection and one kubelet
 * certificate signature with the production FileCertificateAuthority, timed in a process of their own
 * (a child on the same node binary, from the transpiled tree), as the join service runs them on a
 * thread of their own (the CA worker). Timed in this process instead, on the event loop of a
 * benchmark process that has run P1, the two measured 0.93–1.20 ms of CPU together across one day's
 * runs while the service's CA worker thread spent 0.43–0.53 ms per join on them (P8 by thread), and
 * P8 moved with them. The child's CPU is process.cpuUsage: every thread of it, so V8's helper
 * threads count, as the floor's other stages count them.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildDir } from './child.js';

/** Wall, event-loop busy and CPU time per operation (µs). */
export interface Timed {
  us: number;
  busyUs: number;
  cpuUs: number;
}

/** The child: warm-up (≥ 0.5 s and 20 runs) then ≥ 1 s and 100 runs of each operation; one JSON line. */
const CHILD = `
import { performance } from 'node:perf_hooks';
const { module, pkiDir, csr, identity } = JSON.parse(process.env.CONFBOOT_CA_FLOOR);
const { FileCertificateAuthority } = await import(module);
const clock = { now: () => new Date(), sleep: () => Promise.reject(new Error('no sleep')) };
const ca = new FileCertificateAuthority({ clock, pkiDir });
const der = new Uint8Array(Buffer.from(csr, 'base64'));
async function time(fn) {
  const warmUntil = performance.now() + 500;
  for (let i = 0; i < 20 || performance.now() < warmUntil; i++) await fn();
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const t = performance.now();
  const until = t + 1000;
  let runs = 0;
  for (; runs < 100 || performance.now() < until; runs++) await fn();
  const us = ((performance.now() - t) * 1000) / runs;
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  return { us, busyUs: (busy.active * 1000) / runs, cpuUs: (used.user + used.system) / runs };
}
// Run from the event loop (not the module's top-level await, during which eventLoopUtilization
// counts nothing as busy). A fresh copy per inspection: the CA memoises a parse per byte array, and a
// request parses once.
setImmediate(async () => {
  const inspect = await time(() => ca.inspectCsr(new Uint8Array(der)));
  await ca.inspectCsr(der);
  const sign = await time(() => ca.signKubeletCsr(der, identity));
  process.stdout.write(JSON.stringify({ inspect, sign }) + '\\n');
});
`;

/** Times CSR inspection and kubelet signing of `csrDer` for `identity` with the CA in `pkiDir`. */
export async function benchCaFloor(
  pkiDir: string,
  csrDer: Uint8Array,
  identity: { nodeName: string; ipAddresses: string[] },
): Promise<{ inspect: Timed; sign: Timed }> {
  const module = pathToFileURL(
    join(buildDir(), 'src', 'adapters', 'pki', 'file-certificate-authority.js'),
  ).href;
  const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      CONFBOOT_CA_FLOOR: JSON.stringify({
        module,
        pkiDir,
        csr: Buffer.from(csrDer).toString('base64'),
        identity,
      }),
    },
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString('utf8');
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('CA floor: no result after 120 s'));
    }, 120_000);
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  if (code !== 0) throw new Error(`CA floor: the child exited with ${code}`);
  return JSON.parse(out.trim()) as { inspect: Timed; sign: Timed };
}
