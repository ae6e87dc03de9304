/**
 * Stage `evidence` of one boot: follows a VM from the firmware's event log (`measured`) through
 * the one quote it makes for the host (`attesting`: the TCTI it went through, whether the event log
 * in the document replays to the quoted SHA-256 PCRs and is the log /init reported before any node
 * software ran) to the start of the production bootstrapper (`bootstrapping`, with the disk the
 * guest mapped and what the metadata server told it about itself).
 */
import { parseEventLog, replayEventLog } from '../../../adapters/attestation/eventlog/tcg-log.js';
import { decodeVtpmDocument } from '../../../adapters/attestation/shared/vtpm-document.js';
import type { MiniCluster } from '../context.js';
import type { MiniNodeResult } from '../types.js';
import { decodeLog } from './reference.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Records what the VM's own evidence shows (see the module comment). */
function checkEvidence(
  result: MiniNodeResult,
  document: Uint8Array,
  tcti: string,
  measured: Record<string, unknown>,
): void {
  const doc = decodeVtpmDocument(document);
  result.tcti = tcti;
  result.eventLogMatchesBootReport = Buffer.from(doc.attestation.eventLog).equals(
    Buffer.from(String(measured.eventLog), 'base64'),
  );
  const quoted = doc.attestation.quotes.find((q) => q.pcrHashAlg === 11)?.pcrs ?? new Map();
  const replayed = replayEventLog(parseEventLog(doc.attestation.eventLog)).get(11) ?? new Map();
  result.eventLogReplays =
    replayed.size > 0 && [...replayed].every(([p, v]) => quoted.has(p) && hex(quoted.get(p)) === hex(v));
}

/** Throws the VM's own error report, if any. */
function throwIfError(r: Record<string, unknown>): void {
  if (r.type === 'error') throw new Error(`in the VM: ${String(r.message)}`);
}

/** Follows node `name`'s current boot until its bootstrapper started; throws on the VM's error. */
export async function followBoot(c: MiniCluster, name: string): Promise<void> {
  const vm = c.vm(name);
  const res = c.result(name);
  const measured = await c.waitReport(vm, (r) => r.type === 'measured');
  throwIfError(measured);
  c.say(name, 'measured', `(event log ${decodeLog(measured.eventLog).events.length} events)`);
  const evidence = await c.waitReport(vm, (r) => r.type === 'attestation');
  throwIfError(evidence);
  checkEvidence(res, Buffer.from(String(evidence.document), 'base64'), String(evidence.tcti), measured);
  c.say(
    name,
    'attesting',
    `(quote through ${res.tcti}; event log ${res.eventLogReplays ? 'replays to' : 'does NOT replay to'} the quoted PCRs)`,
  );
  await c.waitReport(vm, (r) => r.type === 'started-program' && r.source === 'bootstrapper');
  const reports = c.reports(name);
  const error = reports.find((r) => r.type === 'error');
  if (error) throwIfError(error);
  const disk = reports.find((r) => r.type === 'disk');
  if (disk)
    res.disk = {
      uuid: String(disk.uuid),
      cipher: String(disk.cipher),
      integrity: String(disk.integrity ?? 'none'),
      mapping: String(disk.mapping),
      formatted: disk.formatted === true,
    };
  res.metadataSelf = reports.find((r) => r.type === 'metadata')?.self;
  c.say(
    name,
    'bootstrapping',
    `(confboot bootstrapper; ${res.disk ? `${res.disk.mapping} ${res.disk.cipher}, integrity ${res.disk.integrity}` : 'no disk'})`,
  );
}
