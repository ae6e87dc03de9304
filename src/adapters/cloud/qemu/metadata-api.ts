/**
 * MetadataAPI for QEMU clusters: an HTTP client of the QEMU metadata server
 * (./metadata-server.ts). Unlike upstream's client it checks every status code and
 * the JSON shape, so a 404 "No matching peer found" or a 500 is an error, not an empty instance.
 * It can bind its sockets to a local address, which is how the server tells loopback nodes apart.
 */
import { ConfbootError } from '../../../ports/errors.js';
import type { MetadataAPI } from '../../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata, Role } from '../../../ports/types.js';
import {
  type CommonCloudOptions,
  DEFAULT_CLOUD_TIMEOUT_IN_MS,
  type DeadlineSettings,
  withDeadline,
} from '../../http/call.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';

/** Upstream's address of the metadata server on the QEMU network. */
export const DEFAULT_QEMU_METADATA_URL = 'http://10.42.0.1:8080';

/** Options of {@link QemuMetadataAPI}. */
export interface QemuMetadataAPIOptions extends CommonCloudOptions {
  /** Base URL of the metadata server; default `http://10.42.0.1:8080`. */
  baseUrl?: string;
  /** Local address to bind outgoing sockets to (a simulated node's own 127.0.0.N). */
  localAddress?: string;
}

const ROLES: ReadonlySet<string> = new Set(['Unknown', 'ControlPlane', 'Worker']);

/** Validates one upstream-shaped instance (`{"Name","ProviderID","Role","VPCIP",…}`). */
export function parseWireInstance(value: unknown, what: string): InstanceMetadata {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfbootError('internal', `${what}: expected a JSON object`);
  const v = value as Record<string, unknown>;
  for (const field of ['Name', 'ProviderID', 'Role', 'VPCIP'] as const) {
    if (typeof v[field] !== 'string')
      throw new ConfbootError('internal', `${what}: field ${field} is not a string`);
  }
  if (!ROLES.has(v.Role as string))
    throw new ConfbootError('internal', `${what}: unknown role ${JSON.stringify(v.Role)}`);
  const out: InstanceMetadata = {
    name: v.Name as string,
    providerId: v.ProviderID as string,
    role: v.Role as Role,
    vpcIp: v.VPCIP as string,
  };
  if (typeof v.SecondaryIPRange === 'string' && v.SecondaryIPRange !== '')
    out.secondaryIpRange = v.SecondaryIPRange;
  if (Array.isArray(v.AliasIPRanges)) {
    if (!v.AliasIPRanges.every((r) => typeof r === 'string'))
      throw new ConfbootError('internal', `${what}: AliasIPRanges holds a non-string`);
    if (v.AliasIPRanges.length > 0) out.aliasIpRanges = v.AliasIPRanges as string[];
  } else if (v.AliasIPRanges !== undefined && v.AliasIPRanges !== null) {
    throw new ConfbootError('internal', `${what}: AliasIPRanges is not a list`);
  }
  return out;
}

/** MetadataAPI backed by the QEMU metadata server. */
export class QemuMetadataAPI implements MetadataAPI {
  private readonly baseUrl: string;
  private readonly localAddress: string | undefined;
  private readonly deadline: DeadlineSettings;

  constructor(options: QemuMetadataAPIOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_QEMU_METADATA_URL).replace(/\/+$/, '');
    this.localAddress = options.localAddress;
    this.deadline = {
      timeoutInMs: options.timeoutInMs ?? DEFAULT_CLOUD_TIMEOUT_IN_MS,
      ...(options.logger ? { logger: options.logger } : {}),
    };
  }

  private get(path: string, operation: string, options: CallOptions | undefined) {
    return withDeadline(operation, this.deadline, options, async (signal) => {
      const res = await httpRequest({
        url: `${this.baseUrl}${path}`,
        signal,
        ...(this.localAddress ? { localAddress: this.localAddress } : {}),
      });
      return expectOk(res, `GET ${path}`);
    });
  }

  /** GET /self. */
  async self(options?: CallOptions): Promise<InstanceMetadata> {
    const op = `getting own instance from QEMU metadata server ${this.baseUrl}`;
    const res = await this.get('/self', op, options);
    return parseWireInstance(parseJsonBody(res, 'GET /self'), op);
  }

  /** GET /peers. */
  async list(options?: CallOptions): Promise<InstanceMetadata[]> {
    const op = `listing peers from QEMU metadata server ${this.baseUrl}`;
    const body = parseJsonBody(await this.get('/peers', op, options), 'GET /peers');
    if (!Array.isArray(body)) throw new ConfbootError('internal', `${op}: expected a JSON array`);
    return body.map((v, i) => parseWireInstance(v, `${op}: peer ${i}`));
  }

  /** GET /endpoint: the first control plane's IP; the port is always 6443. */
  async getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    const op = `getting load balancer endpoint from QEMU metadata server ${this.baseUrl}`;
    const body = parseJsonBody(await this.get('/endpoint', op, options), 'GET /endpoint');
    if (typeof body !== 'string' || body === '')
      throw new ConfbootError('internal', `${op}: expected a JSON string`);
    return { host: body, port: '6443' };
  }

  /** GET /initsecrethash: the raw body. */
  async initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    const op = `getting init secret hash from QEMU metadata server ${this.baseUrl}`;
    const res = await this.get('/initsecrethash', op, options);
    return new Uint8Array(res.body);
  }

  /** QEMU clusters have no UID. */
  async uid(_options?: CallOptions): Promise<string> {
    return '';
  }
}
