/**
 * AmiTpmSupport through the AWS SDK: `DescribeImages(ImageIds=[imageId])` in the instance's region,
 * reading `TpmSupport` (the aws-nitro-tpm validator's CVM check wants "v2.0"). The SDK is loaded
 * on first use, so nodes of other clouds never import it; one client per region is kept.
 */
import type { AmiTpmSupport } from '../../../ports/ami-tpm-support.js';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';

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
}

type Ec2Module = typeof import('@aws-sdk/client-ec2');
type Ec2Client = InstanceType<Ec2Module['EC2Client']>;

/** Looks up an AMI's TpmSupport with @aws-sdk/client-ec2. */
export class Ec2AmiTpmSupport implements AmiTpmSupport {
  private sdk: Promise<Ec2Module> | undefined;
  private readonly clients = new Map<string, Ec2Client>();

  constructor(private readonly options: Ec2AmiTpmSupportOptions = {}) {}

  private async client(region: string): Promise<{ sdk: Ec2Module; client: Ec2Client }> {
    this.sdk ??= import('@aws-sdk/client-ec2');
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
    const op = `describing AMI ${imageId} in ${region}`;
    const timeout = AbortSignal.timeout(options?.timeoutInMs ?? this.options.timeoutInMs ?? 10_000);
    const signal = options?.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
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
