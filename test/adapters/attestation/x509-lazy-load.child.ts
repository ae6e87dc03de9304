/**
 * Child process of x509-lazy-load.test.ts (run by node through test/fuzz/harness/ts-loader.mjs, under
 * test/support/record-loads.mjs): does what the join service does at start-up with the validators
 * (imports src/app/registry/validators.ts, builds a qemu-vtpm and an azure-trustedlaunch
 * validator, and validates a qemu-vtpm document), then one azure-trustedlaunch validation. Between the
 * phases it appends a `#phase NAME` line to the record file, so the test can tell which modules each
 * phase loaded. It never imports @peculiar/x509 itself: the AK certificate chain comes from the test
 * (fixture JSON, path in argv[2]). Prints one JSON line with what it observed.
 */
import { createPrivateKey, randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';

/** What the test writes for the child: PEM/base64 DER of the synthetic Azure AK chain. */
export interface LazyLoadFixture {
  /** The soft TPM's AK (PKCS#8 PEM), which `akCertDer` certifies. */
  akPrivateKeyPem: string;
  rootPem: string;
  caDer: string;
  akCertDer: string;
  /** ISO time at which the chain is valid. */
  at: string;
}

const record = process.env.CONFBOOT_RECORD_LOADS;
const fixturePath = process.argv[2];
if (!record || !fixturePath) throw new Error('usage: CONFBOOT_RECORD_LOADS=F node … child.ts FIXTURE');
const fixture = JSON.parse(readFileSync(fixturePath, 'utf8')) as LazyLoadFixture;
const phase = (name: string) => appendFileSync(record, `#phase ${name}\n`);

const { buildValidator } = await import('../../../src/app/registry/validators.js');
const { SoftTpm, SoftVtpmIssuer } = await import('../../support/soft-tpm.js');
const { FakeClock } = await import('../../fakes/fake-clock.js');
const clock = new FakeClock(new Date(fixture.at));
// A fresh soft TPM's PCR 15 is zero.
const config = JSON.stringify({ measurements: { 15: { expected: '00'.repeat(32), warnOnly: false } } });
const userData = randomBytes(32);
const nonce = randomBytes(32);

const qemu = buildValidator('qemu-vtpm', config, { clock });
const azure = buildValidator('azure-trustedlaunch', config, { clock, azureAkRoots: [fixture.rootPem] });
let badRoot = 'built';
try {
  buildValidator('azure-trustedlaunch', config, { clock, azureAkRoots: ['not a certificate'] });
} catch (err) {
  badRoot = err instanceof Error ? err.message : String(err);
}
const tpm = SoftTpm.create({ privateKey: createPrivateKey(fixture.akPrivateKeyPem) });
const qemuResult = await qemu.validate(await new SoftVtpmIssuer(tpm).issue(userData, nonce), nonce);
phase('started');

const instanceInfo = Buffer.from(JSON.stringify({ AkCert: fixture.akCertDer, CA: fixture.caDer }));
const azureDoc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo }).issue(
  userData,
  nonce,
);
const azureResult = await azure.validate(azureDoc, nonce);
phase('validated');

process.stdout.write(
  `${JSON.stringify({
    badRoot,
    qemuUserData: Buffer.from(qemuResult.userData).equals(userData),
    azureUserData: Buffer.from(azureResult.userData).equals(userData),
    azureChecks: azureResult.checks.map((c) => `${c.ok ? 'ok' : 'FAILED'} ${c.name}`),
  })}\n`,
);
