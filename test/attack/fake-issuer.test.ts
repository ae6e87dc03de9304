/**
 * Attack family: forged issuers and foreign variants against the real join service validating
 * qemu-vtpm (policy = the demo image's good boot). Upstream's malicious-join e2e (a fake issuer
 * for the right OID and an empty request), the dummy OID itself, and documents of another variant,
 * each refused in the attested TLS handshake with the exact check, with nothing issued.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { validatorBuilder } from '../../src/app/join-service/production.js';
import { variantOid } from '../../src/app/registry/index.js';
import { expectedAttestationConfig } from '../../src/testbed/demo/boot-measurements.js';
import { DummyIssuer } from '../support/dummy-attestation.js';
import { attempt, clock, EMPTY_REQUEST, expectIssued, expectRefused, snapshot } from './support/attack.js';
import { FixedDocumentIssuer, SoftVtpmIssuer, type SwtpmNode, softTpmNode } from './support/nodes.js';
import { startTarget, startTargetWithNode, type Target } from './support/target.js';

let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

describe('fake issuers (upstream malicious-join) against a qemu-vtpm join service', () => {
  it('control: a real swtpm node with the expected boot gets a ticket', async () => {
    const b = snapshot(target);
    await expectIssued(target, b, await attempt(target.endpoint, node.issuer));
  });

  it('a fake issuer under the right OID 1.3.9900.5.1 (dummy {"UserData","Nonce"} document, empty request) is refused: document-format', async () => {
    const fake = new DummyIssuer('qemu-vtpm');
    expect(fake.oid).toBe('1.3.9900.5.1');
    const b = snapshot(target);
    const out = await attempt(target.endpoint, fake, { request: EMPTY_REQUEST });
    const [audit] = await expectRefused(target, b, out, {
      code: status.UNAVAILABLE,
      check: 'document-format',
    });
    expect(audit?.detail).toContain('Attestation is missing');
    expect(audit?.detail).toContain('qemu-vtpm attestation');
  });

  it('the dummy variant OID 1.3.9900.1.1 itself is refused: unknown-oid', async () => {
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new DummyIssuer('dummy'), { request: EMPTY_REQUEST });
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'unknown-oid' });
    expect(audit?.detail).toContain(
      'attestation variant OID 1.3.9900.1.1 (dummy) is not accepted; accepted: qemu-vtpm (1.3.9900.5.1)',
    );
  });

  it('an OID no variant has is refused: unknown-oid', async () => {
    const doc = new TextEncoder().encode('{}');
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new FixedDocumentIssuer('qemu-vtpm', () => doc, '1.2.3.4'));
    await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'unknown-oid' });
  });
});

/** AWS IMDS instance identity document (Go JSON) of the attacker's "EC2 instance". */
const IDENTITY = new TextEncoder().encode(
  JSON.stringify({ region: 'eu-central-1', imageId: 'ami-0123456789abcdef0', instanceId: 'i-0abc' }),
);

describe('documents of the wrong variant', () => {
  /** FAKE EC2 (the cloud cannot exist here): every AMI supports TPM 2.0; calls counted. */
  const ec2 = {
    calls: 0,
    async tpmSupport(): Promise<string> {
      ec2.calls++;
      return 'v2.0';
    },
  };
  let mixed: Target;
  let nitro: SoftVtpmIssuer;

  beforeAll(async () => {
    mixed = await startTarget({
      extraValidators: [
        validatorBuilder(
          'aws-nitro-tpm',
          // The soft TPM has no AWS-signed NitroTPM document: its AK passes by the documented opt-in.
          { amiTpmSupport: ec2, nitroTpmTrust: { trustCarriedAk: true } },
          clock,
          silentLogger,
        )(new TextEncoder().encode(JSON.stringify(expectedAttestationConfig()))),
      ],
    });
    nitro = new SoftVtpmIssuer(await softTpmNode(), 'aws-nitro-tpm', { instanceInfo: IDENTITY });
  });
  afterAll(() => mixed?.stop());

  it('an aws-nitro-tpm document (genuine TPM quote, good boot) sent to a qemu-vtpm service is refused: unknown-oid', async () => {
    const b = snapshot(target);
    const out = await attempt(target.endpoint, nitro);
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'unknown-oid' });
    expect(audit?.detail).toContain('OID 1.3.9900.2.1 (aws-nitro-tpm) is not accepted');
  });

  it('control (FAKE EC2 lookup): the same aws-nitro-tpm document is accepted by a service that validates aws-nitro-tpm', async () => {
    const b = snapshot(mixed);
    await expectIssued(mixed, b, await attempt(mixed.endpoint, nitro));
    expect(ec2.calls).toBe(1);
  });

  it('a qemu-vtpm document (real swtpm quote) under the aws-nitro-tpm OID is refused by the aws-nitro-tpm validator: ak-trust', async () => {
    const relabelled = {
      variant: 'aws-nitro-tpm' as const,
      oid: variantOid('aws-nitro-tpm'),
      issue: (u: Uint8Array, n: Uint8Array) => node.issuer.issue(u, n),
    };
    const calls = ec2.calls;
    const b = snapshot(mixed);
    const out = await attempt(mixed.endpoint, relabelled);
    const [audit] = await expectRefused(mixed, b, out, { code: status.UNAVAILABLE, check: 'ak-trust' });
    expect(audit?.detail).toContain('InstanceInfo is missing');
    expect(ec2.calls).toBe(calls);
  });

  it('a qemu-vtpm document under an SEV-SNP OID (1.3.9900.2.2) is refused: unknown-oid', async () => {
    const relabelled = {
      variant: 'aws-sev-snp' as const,
      oid: variantOid('aws-sev-snp'),
      issue: (u: Uint8Array, n: Uint8Array) => node.issuer.issue(u, n),
    };
    const b = snapshot(mixed);
    const out = await attempt(mixed.endpoint, relabelled);
    await expectRefused(mixed, b, out, { code: status.UNAVAILABLE, check: 'unknown-oid' });
  });
});
