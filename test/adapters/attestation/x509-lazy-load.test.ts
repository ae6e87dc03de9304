/**
 * The join service's start-up path does not load @peculiar/x509 (benchmark P4): a fresh node process
 * (x509-lazy-load.child.ts, TypeScript sources through test/fuzz/harness/ts-loader.mjs, every resolved
 * module URL recorded by test/support/record-loads.mjs as in test/app/modules/isolation.test.ts)
 * imports src/app/registry/validators.ts, builds a qemu-vtpm and an azure-trustedlaunch validator
 * (and sees a bad AK root refused at build time) and validates a qemu-vtpm document: neither
 * @peculiar/x509 nor reflect-metadata is loaded. One azure-trustedlaunch validation (a synthetic AK
 * chain made here, a soft TPM's genuine quote) then loads it and passes.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { generateKeyPairSync, webcrypto } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import { useTmpDirs } from '../../support/tmp.js';
import type { LazyLoadFixture } from './x509-lazy-load.child.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ROOT = resolve(import.meta.dirname, '../../..');
const RECORDER = join(ROOT, 'test/support/record-loads.mjs');
const TS_LOADER = pathToFileURL(join(ROOT, 'test/fuzz/harness/ts-loader.mjs')).href;
const CHILD = join(import.meta.dirname, 'x509-lazy-load.child.ts');
const tmp = useTmpDirs('confboot-x509-lazy-');
const AT = '2026-11-21T00:00:00.000Z';

/** A root, a CA and an AK certificate for `akSpki`, as Azure's AK chain is shaped. */
async function akChain(akSpki: Buffer): Promise<Omit<LazyLoadFixture, 'akPrivateKeyPem' | 'at'>> {
  const alg = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  const validity = {
    notBefore: new Date('2025-01-01T00:00:00Z'),
    notAfter: new Date('2030-01-01T00:00:00Z'),
  };
  const caExt = [new x509.BasicConstraintsExtension(true, undefined, true)];
  const rootKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
  const caKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=Test AK Root',
    keys: rootKeys,
    signingAlgorithm: alg,
    extensions: caExt,
    ...validity,
  });
  const ca = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'CN=Test AK CA',
    issuer: root.subject,
    publicKey: caKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: alg,
    extensions: caExt,
    ...validity,
  });
  const akCert = await x509.X509CertificateGenerator.create({
    serialNumber: '03',
    subject: 'CN=vm-ak',
    issuer: ca.subject,
    publicKey: await webcrypto.subtle.importKey('spki', akSpki, alg, true, ['verify']),
    signingKey: caKeys.privateKey,
    signingAlgorithm: alg,
    ...validity,
  });
  const der = (c: x509.X509Certificate) => Buffer.from(c.rawData).toString('base64');
  return { rootPem: root.toString('pem'), caDer: der(ca), akCertDer: der(akCert) };
}

interface ChildRun {
  /** Resolved module URLs per phase: `started` (import, build, qemu validation), `validated`. */
  phases: Map<string, string[]>;
  report: { badRoot: string; qemuUserData: boolean; azureUserData: boolean; azureChecks: string[] };
}

/** Runs the child on a fresh fixture and splits its record file at the phase markers. */
async function runChild(): Promise<ChildRun> {
  const dir = tmp();
  const ak = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const fixture: LazyLoadFixture = {
    akPrivateKeyPem: ak.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    ...(await akChain(ak.publicKey.export({ format: 'der', type: 'spki' }))),
    at: AT,
  };
  const fixturePath = join(dir, 'fixture.json');
  writeFileSync(fixturePath, JSON.stringify(fixture));
  const record = join(dir, 'loads.txt');
  const registerTs = `data:text/javascript,import{register}from"node:module";register(${JSON.stringify(TS_LOADER)});`;
  const stdout = await new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      ['--import', RECORDER, '--import', registerTs, CHILD, fixturePath],
      { cwd: ROOT, env: { ...process.env, CONFBOOT_RECORD_LOADS: record }, timeout: 60_000 },
      (err, out, stderr) =>
        err ? fail(new Error(`x509-lazy-load child: ${err.message}\n${stderr}`)) : done(out),
    );
  });
  const phases = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of existsSync(record) ? readFileSync(record, 'utf8').split('\n') : []) {
    if (line.startsWith('#phase ')) {
      phases.set(line.slice('#phase '.length), current);
      current = [];
    } else if (line !== '') current.push(line);
  }
  return { phases, report: JSON.parse(stdout.trim()) as ChildRun['report'] };
}

const fromPackage = (urls: string[], name: string) =>
  urls.filter((u) => u.includes(`/node_modules/${name}/`));

describe('@peculiar/x509 is not loaded on the join service start-up path', () => {
  it('building the vTPM validators (and validating qemu-vtpm) loads neither @peculiar/x509 nor reflect-metadata; the first azure-trustedlaunch validation loads it and passes', async () => {
    const { phases, report } = await runChild();
    const started = phases.get('started') ?? [];
    const validated = phases.get('validated') ?? [];
    // The recorder saw the validators and the azure-trustedlaunch module, so an absence means something.
    expect(started.some((u) => u.endsWith('/src/app/registry/validators.ts'))).toBe(true);
    expect(started.some((u) => u.endsWith('/src/adapters/attestation/variants/azure-trustedlaunch.ts'))).toBe(
      true,
    );
    expect(started.some((u) => u.endsWith('/src/adapters/attestation/tdx/collateral.ts'))).toBe(true);
    expect(fromPackage(started, '@peculiar/x509')).toEqual([]);
    expect(fromPackage(started, 'reflect-metadata')).toEqual([]);
    // Still fail closed at build time on an unreadable root.
    expect(report.badRoot).toMatch(/building the azure-trustedlaunch validator: .*parsing AK root 1: /);
    expect(report.qemuUserData).toBe(true);

    expect(fromPackage(validated, '@peculiar/x509')).not.toEqual([]);
    expect(report.azureUserData).toBe(true);
    expect(report.azureChecks).toContain('ok ak-certificate');
    expect(report.azureChecks).toContain('ok ak-trust');
  }, 60_000);
});
