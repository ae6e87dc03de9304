/**
 * The program a mini node runs inside its VM (bundled into one file and placed in the measured
 * initramfs). It reads its orders from fw_cfg and reports on the second serial port (protocol.ts).
 * Importing this module runs it: it is an entry point only.
 *
 * Before it runs, /init has reported the firmware event log (`measured`). The agent then maps the
 * state disk (disk-mapper.ts) when asked, reports what the metadata server says about this VM, and
 * attests. Step `attest`: a qemu-vtpm attestation document from the node's TPM through the kernel's resource
 * manager (TCTI `device:/dev/tpmrm0`), carrying the firmware event log from securityfs, bound to
 * the host's nonce.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { createQemuVtpmIssuer, LINUX_EVENT_LOG_PATH } from '../../../adapters/attestation/vtpm/issuer.js';
import { DEVICE_TCTI, Tpm2ToolsTpm } from '../../../adapters/tpm/tpm2-tools-tpm.js';
import { mapStateDisk } from './disk-mapper.js';
import { GUEST_CONFIG_PATH, type GuestConfig, REPORT_PORT, REPORT_PREFIX } from './protocol.js';

function report(value: Record<string, unknown>): void {
  appendFileSync(REPORT_PORT, `${REPORT_PREFIX}${JSON.stringify(value)}\n`);
}

async function attest(config: GuestConfig): Promise<void> {
  const tpm = new Tpm2ToolsTpm({ tcti: DEVICE_TCTI, timeoutInMs: 120_000 });
  const issuer = createQemuVtpmIssuer(tpm, { eventLogPath: LINUX_EVENT_LOG_PATH });
  const userData = Buffer.from(config.userData ?? '00'.repeat(32), 'hex');
  const document = await issuer.issue(userData, Buffer.from(config.nonce, 'hex'));
  report({ type: 'attestation', tcti: tpm.tcti, document: Buffer.from(document).toString('base64') });
}

async function main(): Promise<void> {
  const started = Date.now();
  const config = JSON.parse(readFileSync(GUEST_CONFIG_PATH, 'utf8')) as GuestConfig;
  report({ type: 'started', step: config.step });
  if (config.stateDisk !== undefined) {
    report({ type: 'disk', ...(await mapStateDisk(config.stateDisk)) });
  }
  if (config.metadataUrl !== undefined) {
    const res = await fetch(new URL('/self', config.metadataUrl), { signal: AbortSignal.timeout(60_000) });
    report({ type: 'metadata', status: res.status, self: await res.json() });
  }
  if (config.step === 'attest') await attest(config);
  else throw new Error(`unknown step ${String((config as { step: unknown }).step)}`);
  report({ type: 'done', ms: Date.now() - started });
}

main().catch((err: unknown) => {
  try {
    report({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  } catch {}
  console.error('confboot-mini agent:', err);
  process.exitCode = 1;
});
