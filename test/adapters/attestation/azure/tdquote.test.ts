/** The Azure IMDS TD-quote getter against a loopback fake of /acc/tdquote (Azure cannot exist here). */
import { afterEach, describe, expect, it } from 'vitest';
import { imdsTdQuoteGetter } from '../../../../src/adapters/attestation/azure/tdquote.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import {
  type FakeHttpServer,
  type FakeReply,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../../cloud/shared/fake-http.js';

let fake: FakeHttpServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function imds(reply: (report: string) => FakeReply): Promise<string> {
  fake = await startFakeHttpServer((req) => {
    if (
      req.method !== 'POST' ||
      req.url !== '/acc/tdquote' ||
      req.headers['content-type'] !== 'application/json'
    )
      throw new UnexpectedRequest('not a TD quote request');
    return reply((JSON.parse(req.body) as { report: string }).report);
  });
  return fake.url;
}

const tdReport = Uint8Array.from({ length: 1024 }, (_, i) => i % 251);

describe('imdsTdQuoteGetter', () => {
  it('posts the TD report as base64url and returns the decoded quote', async () => {
    const base = await imds((report) => ({
      body: {
        quote: Buffer.concat([Buffer.from('quote:'), Buffer.from(report, 'base64url')]).toString('base64url'),
      },
    }));
    const quote = await imdsTdQuoteGetter({ baseUrl: `${base}/` })(tdReport);
    expect(Buffer.from(quote).subarray(0, 6).toString()).toBe('quote:');
    expect(Buffer.from(quote).subarray(6).equals(Buffer.from(tdReport))).toBe(true);
  });

  it('accepts a quote with and without padding', async () => {
    const base = await imds(() => ({ body: { quote: 'YWJj' } }));
    expect(Buffer.from(await imdsTdQuoteGetter({ baseUrl: base })(tdReport)).toString()).toBe('abc');
    await fake?.close();
    const padded = await imds(() => ({ body: { quote: 'YWI=' } }));
    expect(Buffer.from(await imdsTdQuoteGetter({ baseUrl: padded })(tdReport)).toString()).toBe('ab');
  });

  it.each([
    ['no quote', {}, 'IMDS quote response has no "quote" string'],
    ['an empty quote', { quote: '' }, 'IMDS quote response has no "quote" string'],
    ['a quote that is not base64url', { quote: 'a+b/' }, 'IMDS quote is not base64url'],
    ['a quote of only padding', { quote: '==' }, 'IMDS quote is empty'],
  ])('refuses an answer with %s as internal, naming the URL', async (_n, body, message) => {
    const base = await imds(() => ({ body }));
    const err = await imdsTdQuoteGetter({ baseUrl: base })(tdReport).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('internal');
    expect((err as Error).message).toBe(`getting a TDX quote from ${base}/acc/tdquote: ${message}`);
  });

  it('reports a silent IMDS as deadline-exceeded, the caller’s deadline first', async () => {
    const base = await imds(() => ({ body: {} }));
    fake?.stallNext();
    const err = await imdsTdQuoteGetter({ baseUrl: base, timeoutInMs: 60_000 })(tdReport, {
      timeoutInMs: 100,
    }).catch((e: unknown) => e);
    expect(isConfbootError(err) && [err.code, err.message]).toEqual([
      'deadline-exceeded',
      `getting a TDX quote from ${base}/acc/tdquote: timed out after 100 ms`,
    ]);
  });
});
