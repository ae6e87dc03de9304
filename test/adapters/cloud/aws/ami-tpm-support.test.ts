/**
 * The aws-nitro-tpm AMI lookup's cache: DescribeImages through the REAL @aws-sdk/client-ec2 against a
 * FAKE EC2 on loopback HTTP (EC2 cannot exist here) that counts requests; time is a FakeClock.
 * One request per image within the TTL, shared by concurrent callers and independent of any one
 * caller's signal; unknown images cached briefly; outages not cached; at most `cacheSize` images.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  Ec2AmiTpmSupport,
  type Ec2AmiTpmSupportOptions,
} from '../../../../src/adapters/cloud/aws/ami-tpm-support.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';

const KNOWN = ['ami-0123456789abcdef0', 'ami-0123456789abcdef1', 'ami-0123456789abcdef2'];
let server: Server;
/** DescribeImages requests seen, by image ID. */
let requests: string[] = [];
/** When set, answers wait for it (to hold requests in flight); `failing` answers 500. */
let gate: Promise<void> | undefined;
let failing = false;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', async () => {
      const id = new URLSearchParams(body).get('ImageId.1') ?? '';
      requests.push(id);
      await gate;
      res.setHeader('content-type', 'text/xml');
      if (failing) {
        res.statusCode = 503;
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>Unavailable</Code><Message>down</Message></Error></Errors><RequestID>r</RequestID></Response>',
        );
      } else if (!KNOWN.includes(id)) {
        res.statusCode = 400;
        res.end(
          `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>InvalidAMIID.NotFound</Code><Message>The image id '[${id}]' does not exist</Message></Error></Errors><RequestID>r</RequestID></Response>`,
        );
      } else
        res.end(
          `<?xml version="1.0" encoding="UTF-8"?><DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><imagesSet><item><imageId>${id}</imageId><imageState>available</imageState><tpmSupport>v2.0</tpmSupport></item></imagesSet></DescribeImagesResponse>`,
        );
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
});
afterAll(() => new Promise<void>((ok) => server.close(() => ok())));
beforeEach(() => {
  requests = [];
  gate = undefined;
  failing = false;
});

function ec2(clock: FakeClock, options: Partial<Ec2AmiTpmSupportOptions> = {}): Ec2AmiTpmSupport {
  return new Ec2AmiTpmSupport({
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake' },
    maxAttempts: 1,
    clock,
    ...options,
  });
}

const REGION = 'eu-central-1';
const [A = '', B = '', C = ''] = KNOWN;

describe('EC2 DescribeImages cache (REAL SDK, FAKE EC2 server counting requests)', () => {
  it('asks EC2 once per image within the TTL, and again after it', async () => {
    const clock = new FakeClock();
    const lookup = ec2(clock, { cacheTtlInMs: 3_600_000 });
    for (let i = 0; i < 10; i++) expect(await lookup.tpmSupport(REGION, A)).toBe('v2.0');
    expect(requests).toEqual([A]);
    await clock.advance(3_599_000);
    expect(await lookup.tpmSupport(REGION, A)).toBe('v2.0');
    expect(requests).toEqual([A]);
    await clock.advance(2_000);
    expect(await lookup.tpmSupport(REGION, A)).toBe('v2.0');
    expect(requests).toEqual([A, A]);
    lookup.close();
  });

  it('shares one request among concurrent callers; one caller giving up does not fail the others', async () => {
    const lookup = ec2(new FakeClock());
    let release = () => {};
    gate = new Promise((ok) => {
      release = ok;
    });
    const quitter = new AbortController();
    const abandoned = lookup.tpmSupport(REGION, B, { signal: quitter.signal });
    const others = Array.from({ length: 5 }, () => lookup.tpmSupport(REGION, B));
    quitter.abort(new Error('caller gone'));
    await expect(abandoned).rejects.toThrow('caller gone');
    release();
    expect(await Promise.all(others)).toEqual(Array(5).fill('v2.0'));
    expect(requests).toEqual([B]);
    lookup.close();
  });

  it('caches "no such image" for the negative TTL only', async () => {
    const clock = new FakeClock();
    const lookup = ec2(clock, { negativeTtlInMs: 60_000 });
    const unknown = 'ami-0aaaaaaaaaaaaaaa1';
    for (let i = 0; i < 3; i++) {
      const err = await lookup.tpmSupport(REGION, unknown).catch((e: unknown) => e);
      expect(isConfbootError(err) && err.code).toBe('permission-denied');
    }
    expect(requests).toEqual([unknown]);
    await clock.advance(61_000);
    await lookup.tpmSupport(REGION, unknown).catch(() => undefined);
    expect(requests).toEqual([unknown, unknown]);
    lookup.close();
  });

  it('does not cache an outage', async () => {
    const lookup = ec2(new FakeClock());
    failing = true;
    const err = await lookup.tpmSupport(REGION, C).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    failing = false;
    expect(await lookup.tpmSupport(REGION, C)).toBe('v2.0');
    expect(requests).toEqual([C, C]);
    lookup.close();
  });

  it('keeps at most cacheSize images (the oldest is asked again)', async () => {
    const lookup = ec2(new FakeClock(), { cacheSize: 2 });
    for (const id of [A, B, C, A]) await lookup.tpmSupport(REGION, id);
    expect(requests).toEqual([A, B, C, A]);
    await lookup.tpmSupport(REGION, C);
    expect(requests).toEqual([A, B, C, A]);
    lookup.close();
  });

  it('keys the cache by region too', async () => {
    const lookup = ec2(new FakeClock());
    await lookup.tpmSupport('eu-central-1', A);
    await lookup.tpmSupport('us-east-1', A);
    expect(requests).toEqual([A, A]);
    lookup.close();
  });
});
