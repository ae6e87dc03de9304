import { describe, expect, it } from 'vitest';
import { CsrReader, sanNames, subjectRdns } from '../../../src/adapters/pki/kubelet-csr.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { loadX509 } from '../../../src/adapters/pki/x509-loader.js';

const factory = new X509CsrFactory();

describe('CsrReader', () => {
  it('reads a kubelet CSR: subject RDNs in order, IP SANs, a valid self-signature', async () => {
    const x509 = await loadX509();
    const { csrDer } = await factory.create('worker-1', ['10.0.0.5', 'fd00::5']);
    const { csr, signatureValid } = await new CsrReader().read(x509, csrDer);
    expect(signatureValid).toBe(true);
    expect(subjectRdns(csr)).toEqual([
      [{ type: 'O', value: 'system:nodes' }],
      [{ type: 'CN', value: 'system:node:worker-1' }],
    ]);
    expect(sanNames(x509, csr)).toEqual({ ips: ['10.0.0.5', 'fd00::5'], dns: [] });
  });

  it('a flipped signature byte makes the signature invalid, not the request unreadable', async () => {
    const x509 = await loadX509();
    const der = (await factory.create('worker-1', [])).csrDer;
    der[der.length - 2] = (der[der.length - 2] as number) ^ 0x01;
    expect((await new CsrReader().read(x509, der)).signatureValid).toBe(false);
  });

  it('reads one byte array once, and again when its bytes changed', async () => {
    const x509 = await loadX509();
    const reader = new CsrReader();
    const a = (await factory.create('worker-1', [])).csrDer;
    const first = reader.read(x509, a);
    expect(reader.read(x509, a)).toBe(first);
    expect((await first).signatureValid).toBe(true);
    a[a.length - 2] = (a[a.length - 2] as number) ^ 0x01;
    const again = reader.read(x509, a);
    expect(again).not.toBe(first);
    expect((await again).signatureValid).toBe(false);
  });

  it.each([
    ['an empty request', new Uint8Array(), /empty/],
    ['bytes that are no request', new Uint8Array([1, 2, 3]), /cannot be parsed/],
  ])('refuses %s as invalid-argument', async (_name, der, message) => {
    const x509 = await loadX509();
    let err: unknown;
    try {
      await new CsrReader().read(x509, der);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'invalid-argument', message });
  });
});
