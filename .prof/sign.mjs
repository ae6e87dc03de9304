import 'reflect-metadata';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { webcrypto, createPrivateKey } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { FileCertificateAuthority } from '/work/main/dist/src/adapters/pki/file-certificate-authority.js';
import { X509CsrFactory } from '/work/main/dist/src/adapters/pki/x509-csr-factory.js';
x509.cryptoProvider.set(webcrypto);
const dir = mkdtempSync('/tmp/prof/pki-');
const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
const ca = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: '01', name: 'CN=kubernetes', notBefore: new Date(Date.now()-1e6), notAfter: new Date(Date.now()+1e10), keys, signingAlgorithm: alg, extensions: [new x509.BasicConstraintsExtension(true, undefined, true), await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)] });
writeFileSync(join(dir, 'ca.crt'), ca.toString('pem'));
const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
writeFileSync(join(dir, 'ca.key'), createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }));
const clock = { now: () => new Date() };
const fca = new FileCertificateAuthority({ clock, pkiDir: dir });
const f = new X509CsrFactory();
const { csrDer } = await f.create('node-1', ['10.0.0.1']);
const id = { nodeName: 'node-1', ipAddresses: ['10.0.0.1'] };
const N = Number(process.env.N ?? 3000);
for (let i = 0; i < 300; i++) { const c = new Uint8Array(csrDer); await fca.inspectCsr(c); await fca.signKubeletCsr(c, id); }
let t = performance.now(); let cpu = process.cpuUsage();
for (let i = 0; i < N; i++) { await fca.inspectCsr(new Uint8Array(csrDer)); }
let c1 = process.cpuUsage(cpu); console.log('inspect ms wall', (performance.now()-t)/N, 'cpu', (c1.user+c1.system)/1000/N);
const c = new Uint8Array(csrDer); await fca.inspectCsr(c);
t = performance.now(); cpu = process.cpuUsage();
for (let i = 0; i < N; i++) { await fca.signKubeletCsr(c, id); }
c1 = process.cpuUsage(cpu); console.log('sign ms wall', (performance.now()-t)/N, 'cpu', (c1.user+c1.system)/1000/N, process.version);
