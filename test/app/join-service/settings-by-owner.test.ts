/** The join service's parsed options read into one group per owner, with the checks spanning options. */
import { describe, expect, it } from 'vitest';
import { joinServiceCommand } from '../../../src/app/cli/join-service-spec.js';
import { DEFAULT_SHUTDOWN_GRACE_MS } from '../../../src/app/join-service/service.js';
import { joinServiceSettings } from '../../../src/app/join-service/settings-by-owner.js';
import { parseOptions } from '../../../src/app/program/options.js';

const REQUIRED = [
  '--cloud=qemu',
  '--variant=qemu-vtpm',
  '--attestation-config=/c',
  '--measurement-salt-file=/s',
  '--key-service-endpoint=ks:9000',
];

function settings(...extra: string[]) {
  const values = parseOptions([...REQUIRED, ...extra], joinServiceCommand, undefined, { env: {} });
  if (values === undefined) throw new Error('no values');
  return joinServiceSettings(values);
}

describe('joinServiceSettings', () => {
  it('hands each owner its group under names without the group prefix', () => {
    const s = settings(
      '--key-service-ca=/ca',
      '--key-service-cert=/c',
      '--key-service-key=/k',
      '--receipt-key=/r',
    );
    expect(s.keyService).toEqual({ endpoint: 'ks:9000', ca: '/ca', cert: '/c', key: '/k' });
    expect(s.receipts).toEqual({ key: '/r', retiredJwks: undefined });
    expect(s.cloud.cloud).toBe('qemu');
    expect(s.limits).toMatchObject({ rateLimit: 10, shutdownGrace: DEFAULT_SHUTDOWN_GRACE_MS });
    expect(s.admission.deadlines?.clientHelloMs).toBeGreaterThan(0);
  });

  it.each([
    [['--key-service-ca=/ca'], /missing --key-service-cert, --key-service-key$/],
    [['--evidence-store=file'], /^--evidence-store=file needs --state-dir$/],
    [['--tdx-root-crl-url=http://m/root.crl'], /^--tdx-root-crl-url needs --tdx-collateral pcs\[:URL\]$/],
    [['--tdx-collateral=pcs:ftp://m'], /^--tdx-collateral: /],
  ])('refuses %j', (extra, message) => {
    expect(() => settings(...extra)).toThrow(message);
  });

  it('hands the limits their rate burst', () => {
    expect(settings().limits.rateBurst).toBeUndefined();
    expect(settings('--rate-burst=5').limits.rateBurst).toBe(5);
    expect(() => settings('--rate-burst=0')).toThrow('--rate-burst: want a whole number ≥ 1, got "0"');
  });

  it('keeps evidence in a file when a state directory is given, else nowhere unless told', () => {
    expect(settings('--state-dir=/d').evidence.evidenceStore).toBe('file');
    expect(settings().evidence.evidenceStore).toBeUndefined();
    expect(settings('--evidence-store=cluster').evidence.evidenceStore).toBe('cluster');
  });
});
