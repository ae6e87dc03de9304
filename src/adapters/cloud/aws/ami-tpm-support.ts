/**
 * AmiTpmSupport through the AWS SDK: `DescribeImages(ImageIds=[imageId])` in the instance's region,
 * reading `TpmSupport` (the aws-nitro-tpm validator's CVM check wants "v2.0"). The SDK is loaded
 * on first use, so nodes of other clouds never import it; one client per region is kept.
 *
 * Answers are cached per region and image on the Clock port (an AMI's TpmSupport never changes; EC2
 * refills DescribeImages at 20/s per account and region, shared with everything else in the
 * account): found images for `cacheTtlInMs`, unknown ones for `negativeTtlInMs`, at most
 * `cacheSize` entries (the oldest go first). Concurrent lookups of one image share one request,
 * which runs under its own deadline, not any one caller's signal; outages are not cached.
 */
import type { AmiTpmSupport } from '../../../ports/ami-tpm-support.js';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, isConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { importOptionalPeer } from '../../system/optional-peer.js';

/** Options of {@link Ec2AmiTpmSupport}. */
export interface Ec2AmiTpmSupportOptions {
  /** EC2 endpoint override (local fakes only); default the SDK's regional endpoint. */
  endpoint?: string;
  /** Static credentials; default the SDK's provider chain (instance role on EC2). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** SDK attempts per call, default 3. */
  maxAttempts?: number;
  /** Per-call deadline, default 10 s. */
  timeoutInMs?: number;
  /** Time of the cache; default the system clock. */
  clock?: Pick<Clock, 'now'>;
  /** How long an image's TpmSupport is reused, default 1 h; 0 disables the cache. */
  cacheTtlInMs?: number;
  /** How long "no such image" is reused, default 60 s. */
  negativeTtlInMs?: number;
  /** Images kept at most, default 1024. */
  cacheSize?: number;
}

/** One cached answer: TpmSupport, or the "no such image" error. */
interface CacheEntry {
  expiresAt: number;
  support?: string | undefined;
  error?: ConfbootError;
}

const SYSTEM_TIME: Pick<Clock, 'now'> = { now: () => new Date() };

type Ec2Module = typeof import('@aws-sdk/client-ec2');
type Ec2Client = InstanceType<Ec2Module['EC2Client']>;

/** Looks up an AMI's TpmSupport with @aws-sdk/client-ec2. */
export class Ec2AmiTpmSupport implements AmiTpmSupport {
  private sdk: Promise<Ec2Module> | undefined;
  private readonly clients = new Map<string, Ec2Client>();
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<string | undefined>>();
  private readonly clock: Pick<Clock, 'now'>;
  private readonly ttl: number;
  private readonly negativeTtl: number;
  private readonly cacheSize: number;

  constructor(private readonly options: Ec2AmiTpmSupportOptions = {}) {
    this.clock = options.clock ?? SYSTEM_TIME;
    this.ttl = options.cacheTtlInMs ?? 3_600_000;
    this.negativeTtl = options.negativeTtlInMs ?? 60_000;
    this.cacheSize = options.cacheSize ?? 1024;
  }

  private async client(region: string): Promise<{ sdk: Ec2Module; client: Ec2Client }> {
    this.sdk ??= importOptionalPeer(() => import('@aws-sdk/client-ec2'));
    const sdk = await this.sdk;
    let client = this.clients.get(region);
    if (!client) {
      const o = this.options;
      client = new sdk.EC2Client({
        region,
        maxAttempts: o.maxAttempts ?? 3,
        ...(o.endpoint ? { endpoint: o.endpoint } : {}),
        ...(o.credentials ? { credentials: o.credentials } : {}),
      });
      this.clients.set(region, client);
    }
    return { sdk, client };
  }

  /** {@inheritDoc AmiTpmSupport.tpmSupport} */
  async tpmSupport(region: string, imageId: string, options?: CallOptions): Promise<string | undefined> {
    options?.signal?.throwIfAborted();
    const key = `${region}/${imageId}`;
    const now = this.clock.now().getTime();
    const hit = this.cache.get(key);
    if (hit && hit.expiresAt > now) {
      if (hit.error) throw hit.error;
      return hit.support;
    }
    if (hit) this.cache.delete(key);
    let shared = this.inflight.get(key);
    if (!shared) {
      shared = this.describe(region, imageId, options?.timeoutInMs).then(
        (support) => {
          this.remember(key, { expiresAt: this.clock.now().getTime() + this.ttl, support });
          return support;
        },
        (err: unknown) => {
          if (isConfbootError(err) && err.code === 'permission-denied')
            this.remember(key, { expiresAt: this.clock.now().getTime() + this.negativeTtl, error: err });
          throw err;
        },
      );
      const settled = shared.finally(() => this.inflight.delete(key));
      settled.catch(() => undefined);
      this.inflight.set(key, shared);
    }
    if (!options?.signal) return shared;
    const signal = options.signal;
    // The caller may stop waiting; the shared request goes on for the others.
    return new Promise<string | undefined>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      shared.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private remember(key: string, entry: CacheEntry): void {
    if (this.ttl <= 0) return;
    this.cache.delete(key);
    this.cache.set(key, entry);
    while (this.cache.size > this.cacheSize) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
  }

  /** One DescribeImages call under its own deadline. */
  private async describe(region: string, imageId: string, timeoutInMs?: number): Promise<string | undefined> {
    const op = `describing AMI ${imageId} in ${region}`;
    const signal = AbortSignal.timeout(timeoutInMs ?? this.options.timeoutInMs ?? 10_000);
    let images: Array<{ ImageId?: string; TpmSupport?: string }>;
    try {
      const { sdk, client } = await this.client(region);
      const out = await client.send(new sdk.DescribeImagesCommand({ ImageIds: [imageId] }), {
        abortSignal: signal,
      });
      images = out.Images ?? [];
    } catch (err) {
      const name = (err as { name?: string }).name ?? '';
      // A malformed or unknown image ID is the attester's fault, not an outage.
      if (/InvalidAMIID/.test(name)) throw wrapError(op, err, 'permission-denied');
      throw wrapError(op, err, 'unavailable');
    }
    const image = images.find((i) => i.ImageId === imageId) ?? (images.length === 1 ? images[0] : undefined);
    if (!image) throw new ConfbootError('permission-denied', `${op}: no such image`);
    return image.TpmSupport || undefined;
  }

  /** Releases the SDK clients' sockets. */
  close(): void {
    for (const c of this.clients.values()) c.destroy();
    this.clients.clear();
  }
}
