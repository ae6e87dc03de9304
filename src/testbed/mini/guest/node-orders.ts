/**
 * What a mini node runs for the `reattest` step of `mini lifecycle` (agent.ts), beside the
 * production bootstrapper's verification service:
 * - the host's orders on {@link ORDERS_PORT}: `POST /extend-pcr` extends a PCR through the kernel's
 *   resource manager (/dev/tpmrm0, `tpm2_pcrevent`), changing the node's measured state after it
 *   joined. Only the metadata server's address (the host's side of the bridge) is served; the body
 *   is at most 1 KiB;
 * - on a control plane, the node operator's re-attestation flags: the cluster's variant, the
 *   attestation config and AK registry files the join service reads, and the cluster ID, which the
 *   bootstrapper printed when it initialised the cluster and the agent keeps on the state disk (a
 *   control plane recovered after an outage reads it back from there).
 */

import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { dirname } from 'node:path';
import { DEVICE_TCTI, Tpm2ToolsTpm } from '../../../adapters/tpm/tpm2-tools-tpm.js';
import { messageOf } from '../../../ports/errors.js';
import {
  type ExtendPcrOrder,
  OPERATOR_METRICS_PORT,
  ORDERS_PORT,
  type PcrExtended,
  VERIFY_PORT,
} from './protocol.js';
import { STATE_MOUNT } from './state.js';

type Report = (value: Record<string, unknown>) => void;

const CLUSTER_ID_FILE = `${STATE_MOUNT}/confboot-mini/cluster-id`;
const MAX_BODY = 1024;

/** The IPv4 address without an IPv4-mapped IPv6 prefix. */
function plain(address: string | undefined): string {
  return (address ?? '').replace(/^::ffff:/, '');
}

function parseOrder(text: string): ExtendPcrOrder {
  const o = JSON.parse(text) as Partial<ExtendPcrOrder>;
  if (!Number.isInteger(o.pcr) || (o.pcr as number) < 0 || (o.pcr as number) > 15)
    throw new Error('pcr: want 0 to 15');
  if (typeof o.data !== 'string' || !/^([0-9a-f]{2}){1,64}$/.test(o.data))
    throw new Error('data: want 1 to 64 bytes as lower-case hex');
  return { pcr: o.pcr as number, data: o.data };
}

/** Where {@link serveOrders} listens and which TPM it extends; defaults the VM's. */
export interface OrdersOptions {
  /** Default `device:/dev/tpmrm0`. */
  tcti?: string;
  /** Default {@link ORDERS_PORT} (0: any free port). */
  port?: number;
  /** Default all addresses. */
  listen?: string;
}

/** Extends the PCR as ordered; the register's value before and after. */
async function extendPcr(order: ExtendPcrOrder, tcti: string): Promise<PcrExtended> {
  const tpm = new Tpm2ToolsTpm({ tcti, timeoutInMs: 120_000 });
  const read = async () =>
    Buffer.from((await tpm.readPcrs([order.pcr])).get(order.pcr) ?? []).toString('hex');
  const before = await read();
  await tpm.pcrEvent(order.pcr, Buffer.from(order.data, 'hex'));
  return { pcr: order.pcr, before, after: await read() };
}

/** Serves the host's orders from `hostAddress` only (see the module header); resolves once listening. */
export async function serveOrders(
  hostAddress: string,
  report: Report,
  options: OrdersOptions = {},
): Promise<Server> {
  const server = createServer((req, res) => {
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify(body));
    };
    if (plain(req.socket.remoteAddress) !== hostAddress) return answer(403, { error: 'not the host' });
    if (req.method !== 'POST' || req.url !== '/extend-pcr') return answer(404, { error: 'no such order' });
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > MAX_BODY) req.destroy();
    });
    req.on('end', () => {
      let order: ExtendPcrOrder;
      try {
        order = parseOrder(body);
      } catch (err) {
        answer(400, { error: messageOf(err) });
        return;
      }
      extendPcr(order, options.tcti ?? DEVICE_TCTI).then(
        (done) => {
          report({ type: 'pcr-extended', ...done });
          answer(200, done);
        },
        (err: unknown) => answer(500, { error: messageOf(err) }),
      );
    });
  });
  server.requestTimeout = 180_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? ORDERS_PORT, options.listen ?? '0.0.0.0', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  report({ type: 'orders', listen: `${options.listen ?? '0.0.0.0'}:${port}`, from: hostAddress });
  return server;
}

/** Keeps the cluster ID of the bootstrapper's outcome line (`… (cluster ID <hex>)`) on the state disk. */
export async function keepClusterId(line: string, file = CLUSTER_ID_FILE): Promise<void> {
  const id = /\(cluster ID ([0-9a-f]{64})\)/.exec(line)?.[1];
  if (id === undefined) return;
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, id);
}

/**
 * The node operator's re-attestation flags, once the join service's files in `runDir` and the
 * cluster ID exist (bounded wait); re-attests every 5 s and cordons a failed node.
 */
export async function reattestationArgs(
  runDir: string,
  clusterIdFile = CLUSTER_ID_FILE,
  waitMs = 15 * 60_000,
): Promise<string[]> {
  const config = `${runDir}/attestationConfig.json`;
  const registry = `${runDir}/ak-registry.json`;
  const deadline = Date.now() + waitMs;
  while (!(existsSync(config) && existsSync(registry) && existsSync(clusterIdFile))) {
    if (Date.now() > deadline)
      throw new Error(
        `no attestation config, AK registry or cluster ID for re-attestation within ${waitMs} ms`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
  const clusterId = (await readFile(clusterIdFile, 'utf8')).trim();
  return [
    '--variant=qemu-vtpm',
    `--attestation-config=${config}`,
    `--qemu-ak-registry=${registry}`,
    `--cluster-id=${clusterId}`,
    '--reattest-interval=5s',
    '--reattest-cordon',
    // TCG guests are ~100 times slower than hardware: a quote takes seconds.
    '--reattest-deadline=120s',
    `--verification-port=${VERIFY_PORT}`,
    `--metrics-listen=0.0.0.0:${OPERATOR_METRICS_PORT}`,
  ];
}
