/**
 * Connections attested TLS refused or dropped: counted by reason, a refusal audited with its reason code and check
 * and kept as evidence under the caller's address (stubs for the server's hooks and the store).
 */
import { describe, expect, it } from 'vitest';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { AUDIT_MESSAGE } from '../../../src/app/join-service/audit.js';
import { joinAuditSink } from '../../../src/app/join-service/audit-sink.js';
import { observeAttestedTls, recordRefusedEvidence } from '../../../src/app/join-service/tls-refusals.js';
import { AttestationError } from '../../../src/ports/errors.js';
import type { EvidenceRecord } from '../../../src/ports/evidence-store.js';
import { RecordingLogger } from '../../domain/stubs.js';
import { FakeClock } from '../../fakes/fake-clock.js';

type Tls = AttestedGrpcServer['tls'];

function stubServer() {
  const tls = { pendingHandshakes: 2, pendingSources: 1, verifying: 0 } as unknown as Tls;
  return { server: { tls } as AttestedGrpcServer, tls };
}

describe('observeAttestedTls', () => {
  it('audits a refused connection with its check and counts it; a drop is only counted', async () => {
    const { server, tls } = stubServer();
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    const logger = new RecordingLogger();
    observeAttestedTls(server, metrics, joinAuditSink({ logger, clock: new FakeClock() }));
    tls.onRefused?.('192.0.2.7:40000', new AttestationError('measurements', 'PCR 4 expected aa…, got bb…'));
    tls.onDropped?.('192.0.2.8:40001', 'client-hello-timeout');
    const audits = logger.events.filter((e) => e.msg === AUDIT_MESSAGE);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({
      level: 'warn',
      fields: {
        rpc: 'attested-tls',
        peer: '192.0.2.7:40000',
        outcome: 'refused',
        reason: 'measurement-mismatch',
        check: 'measurements',
      },
    });
    const text = await metrics.render();
    expect(text).toMatch(/confboot_atls_dropped_connections_total\{reason="client-hello-timeout"\} 1/);
    expect(text).toMatch(/confboot_attestation_refusals_total\{[^}]*check="measurements"[^}]*\} 1/);
    expect(text).toMatch(/confboot_join_requests_total\{[^}]*reason="measurement-mismatch"\} 1/);
  });

  it('a connection refused before any document was judged is a protocol-error', async () => {
    const { server, tls } = stubServer();
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    const logger = new RecordingLogger();
    observeAttestedTls(server, metrics, joinAuditSink({ logger, clock: new FakeClock() }));
    tls.onRefused?.('192.0.2.7:40000', new Error('wrong version number'));
    expect(logger.events.find((e) => e.msg === AUDIT_MESSAGE)?.fields).toMatchObject({
      reason: 'protocol-error',
      code: 'permission-denied',
    });
    expect(await metrics.render()).toMatch(/confboot_join_requests_total\{[^}]*reason="protocol-error"\} 1/);
  });
});

describe('recordRefusedEvidence', () => {
  it('keeps the refused document under the caller address with the reason code that refused it', () => {
    const records: EvidenceRecord[] = [];
    const store = { record: async (r: EvidenceRecord) => void records.push(r) };
    const validators = [
      { variant: 'qemu-vtpm' as const, oid: '1.3.9900.5.1', validate: async () => ({}) as never },
    ];
    const sink = joinAuditSink({
      logger: new RecordingLogger(),
      clock: new FakeClock(Date.UTC(2026, 0, 2)),
      evidence: store as never,
    });
    const record = recordRefusedEvidence(sink, validators);
    record({
      peerAddress: '192.0.2.7',
      oid: '1.3.9900.5.1',
      document: new Uint8Array([1]),
      nonce: new Uint8Array([2]),
      error: new AttestationError('measurements', 'refused'),
    });
    expect(records).toEqual([
      {
        key: 'address/192.0.2.7',
        peer: '192.0.2.7',
        variant: 'qemu-vtpm',
        oid: '1.3.9900.5.1',
        document: new Uint8Array([1]),
        nonce: new Uint8Array([2]),
        rpc: 'attested-tls',
        outcome: 'refused',
        reason: 'measurement-mismatch',
        at: '2026-01-02T00:00:00.000Z',
      },
    ]);
  });
});
