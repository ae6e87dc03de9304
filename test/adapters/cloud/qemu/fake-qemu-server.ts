/**
 * The QEMU "cloud" for tests: the real QEMU metadata server (src/adapters/cloud/qemu) reading a
 * leases file in a temp dir, behind a fault-injecting pass-through (fake-http.ts) so the contract's
 * transient-failure cases can run. The pass-through binds its upstream socket to the client's own
 * source address, so the metadata server still tells nodes apart by source address.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type RunningMetadataServer,
  startMetadataServer,
} from '../../../../src/adapters/cloud/qemu/metadata-server.js';
import { httpRequest } from '../../../../src/adapters/http/request.js';
import { type FakeHttpServer, startFakeHttpServer } from '../shared/fake-http.js';

/** One lease line's content. */
export interface LeaseSpec {
  ip: string;
  hostname: string;
  mac?: string;
}

/** Renders dnsmasq lease lines. */
export function leasesText(leases: LeaseSpec[]): string {
  return leases
    .map((l, i) => `1893456000 ${l.mac ?? `52:54:00:00:00:${(i + 16).toString(16)}`} ${l.ip} ${l.hostname} *`)
    .join('\n')
    .concat('\n');
}

/** A QEMU world: leases file, metadata server, fault proxy. */
export class FakeQemuCloud {
  private server: RunningMetadataServer | undefined;
  private serverPort = 0;
  private proxy: FakeHttpServer | undefined;

  private constructor(readonly leasesFile: string) {}

  /** Starts the server (empty leases, no init secret hash) and the proxy in front of it. */
  static async start(dir: string): Promise<FakeQemuCloud> {
    const cloud = new FakeQemuCloud(join(dir, 'dnsmasq.leases'));
    await writeFile(cloud.leasesFile, '');
    await cloud.restart('');
    cloud.proxy = await startFakeHttpServer(async (req) => {
      const res = await httpRequest({
        url: `http://127.0.0.1:${cloud.serverPort}${req.url}`,
        method: req.method,
        localAddress: req.remoteAddress.replace(/^::ffff:/, ''),
      });
      return {
        status: res.status,
        body: res.body.toString('utf8'),
        contentType: String(res.headers['content-type'] ?? 'text/plain'),
      };
    });
    return cloud;
  }

  /** The URL clients use (the proxy). */
  get url(): string {
    if (!this.proxy) throw new Error('not started');
    return this.proxy.url;
  }

  /** The fault injector in front of the server. */
  get faults(): FakeHttpServer {
    if (!this.proxy) throw new Error('not started');
    return this.proxy;
  }

  /** Restarts the metadata server with another init secret hash (it is a start-up flag, as upstream). */
  async restart(initSecretHash: string): Promise<void> {
    await this.server?.close();
    this.server = await startMetadataServer({
      leasesFile: this.leasesFile,
      initSecretHash,
      host: '127.0.0.1',
      port: this.serverPort,
    });
    this.serverPort = this.server.port;
  }

  /** Rewrites the leases file. */
  async setLeases(leases: LeaseSpec[]): Promise<void> {
    await writeFile(this.leasesFile, leasesText(leases));
  }

  async close(): Promise<void> {
    await this.proxy?.close();
    await this.server?.close();
  }
}
