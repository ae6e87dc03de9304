/** The library entry exports what docs/embedding.md promises, and never the test-only dummy variant. */
import { describe, expect, it } from 'vitest';
import * as confboot from '../src/index.js';
import * as contract from './contract/index.js';
import * as testing from './fakes/index.js';

describe('library exports', () => {
  it.each([
    'JoinFlow',
    'InitFlow',
    'Bootstrapper',
    'NodeLock',
    'TicketIssuer',
    'MeasurementsPolicy',
    'parseAttestationConfig',
    'deriveClusterId',
    'startBootstrapperNode',
    'createNodeContainer',
    'createValidator',
    'buildValidator',
    'IntelPcsCollateralSource',
    'createJoinServer',
    'createInitServer',
    'GrpcJoinTicketClient',
    'GrpcInitClient',
    'HkdfKms',
    'Tpm2ToolsTpm',
    'startJoinService',
    'ConfbootError',
    'variantOid',
    'variantOfOid',
  ])('confboot exports %s', (name) => {
    expect((confboot as Record<string, unknown>)[name]).toBeDefined();
  });

  it.each([
    'describeMetadataApiContract',
    'describeEncryptedDiskContract',
    'describeClusterJoinerContract',
    'describeKmsContract',
    'describeAttestationContract',
  ])('confboot/contract exports %s', (name) => {
    expect(typeof (contract as Record<string, unknown>)[name]).toBe('function');
  });

  it.each([
    'FakeAttestation',
    'FakeClock',
    'FakeMetadataAPI',
    'FakeEncryptedDisk',
    'FakeClusterJoiner',
    'FakeKms',
    'FakeNodeMarker',
    'FakeNodeStateStore',
    'FakeLogger',
  ])('confboot/testing exports the reference fake %s', (name) => {
    expect(typeof (testing as Record<string, unknown>)[name]).toBe('function');
  });

  it('cannot build a dummy validator', () => {
    expect(() => confboot.createValidator('dummy', { policy: { compare: () => [] } })).toThrow(/tests only/);
    expect(confboot.PRODUCTION_VARIANTS).not.toContain('dummy');
  });
});
