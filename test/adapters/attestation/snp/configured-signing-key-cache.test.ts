/**
 * A certificate cache with the operator's configured signing key (a REAL AMD certificate from the
 * test vectors here): the chain of the configured product and signer is that certificate alone,
 * without a fetch; every other chain, VCEK and CRL comes from the shared cache underneath.
 */
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AmdCertCache, type AmdChainDer } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import { ConfiguredSigningKeyCache } from '../../../../src/adapters/attestation/snp/configured-signing-key-cache.js';
import type { AmdProductLine, AmdTcbSpl } from '../../../../src/ports/amd-cert-fetcher.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { vec } from './vectors.js';

const pem = vec('go-sev-guest/trust/ask_ark_milan.pem').toString('utf8');
const ASK = new X509Certificate(pem.slice(0, pem.indexOf('-----END CERTIFICATE-----') + 25));

/** The shared cache underneath, recording what it is asked. */
class RecordingCache extends AmdCertCache {
  readonly calls: string[] = [];
  constructor() {
    super(
      {
        fetchVcek: () => Promise.reject(new Error('no fetch in this test')),
        fetchCertChain: () => Promise.reject(new Error('no fetch in this test')),
      },
      new FakeClock(),
    );
  }
  override async getChain(product: AmdProductLine, signer: 'vcek' | 'vlek'): Promise<AmdChainDer> {
    this.calls.push(`chain ${product} ${signer}`);
    return { ask: new Uint8Array([1]), ark: new Uint8Array([2]) };
  }
  override async getVcek(product: AmdProductLine, chipId: Uint8Array, tcb: AmdTcbSpl): Promise<Uint8Array> {
    this.calls.push(`vcek ${product} ${chipId.length} ${tcb.snp}`);
    return new Uint8Array([3]);
  }
  override async getCrl(product: AmdProductLine, signer: 'vcek' | 'vlek'): Promise<Uint8Array> {
    this.calls.push(`crl ${product} ${signer}`);
    return new Uint8Array([4]);
  }
}

describe('ConfiguredSigningKeyCache', () => {
  it('answers the configured product and signer with the configured certificate, fetching nothing', async () => {
    const inner = new RecordingCache();
    const cache = new ConfiguredSigningKeyCache(
      inner,
      { cert: ASK, signer: 'vlek', product: 'milan' },
      new FakeClock(),
    );
    const chain = await cache.getChain('milan', 'vlek');
    expect(Buffer.from(chain.ask).equals(ASK.raw)).toBe(true);
    expect(chain.ark).toBeUndefined();
    expect(inner.calls).toEqual([]);
  });

  it('passes every other chain, the VCEKs and the CRLs to the shared cache', async () => {
    const inner = new RecordingCache();
    const cache = new ConfiguredSigningKeyCache(
      inner,
      { cert: ASK, signer: 'vlek', product: 'milan' },
      new FakeClock(),
    );
    expect(await cache.getChain('milan', 'vcek')).toEqual({
      ask: new Uint8Array([1]),
      ark: new Uint8Array([2]),
    });
    await cache.getChain('genoa', 'vlek');
    expect([
      ...(await cache.getVcek('milan', new Uint8Array(64), { bl: 1, tee: 0, snp: 8, ucode: 9 })),
    ]).toEqual([3]);
    expect([...(await cache.getCrl('milan', 'vlek'))]).toEqual([4]);
    expect(inner.calls).toEqual([
      'chain milan vcek',
      'chain genoa vlek',
      'vcek milan 64 8',
      'crl milan vlek',
    ]);
  });
});
