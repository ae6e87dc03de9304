/**
 * The host provisions each mini VM's TPM before the VM boots: `swtpm_setup` creates the EK with an
 * EK certificate (and a platform certificate) signed by the local CA that `swtpm_localca` keeps,
 * then, with the TPM started briefly on loopback, confboot's attestation key is created and
 * persisted at its usual handle. Its public area is registered for the VM, so a validator with the
 * qemu-vtpm AK-trust option accepts quotes from this TPM only for this VM.
 */
import { mkdir } from 'node:fs/promises';
import { startSwtpm } from '../../adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../adapters/tpm/tpm2-tools-tpm.js';
import type { AkRegistry as QemuAkRegistry } from '../../ports/ak-registry.js';
import { run } from '../vm/run.js';

/** What provisioning produced. */
export interface ProvisionedTpm {
  stateDir: string;
  /** TPMT_PUBLIC of the persisted AK. */
  akPub: Uint8Array;
  /** DER of the EK certificate swtpm_setup stored in NV (RSA EK, TCG index 0x01c00002). */
  ekCertificate: Uint8Array;
}

/** TCG's NV index of the RSA 2048 EK certificate. */
export const EK_CERT_NV_INDEX = 0x01c00002;

/** Creates EK (+ certificate) and AK in a new swtpm state directory. */
export async function provisionTpm(stateDir: string): Promise<ProvisionedTpm> {
  await mkdir(stateDir, { recursive: true });
  await run(
    'swtpm_setup',
    [
      '--tpm2',
      '--tpmstate',
      stateDir,
      '--createek',
      '--create-ek-cert',
      '--create-platform-cert',
      '--overwrite',
    ],
    { timeoutMs: 120_000 },
  );
  const swtpm = await startSwtpm({ stateDir, readyTimeoutInMs: 20_000 });
  try {
    const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti, timeoutInMs: 60_000 });
    const akPub = await tpm.attestationKeyPublic();
    const ekCertificate = await tpm.readNvIndex(EK_CERT_NV_INDEX);
    return { stateDir, akPub, ekCertificate };
  } finally {
    await swtpm.stop();
  }
}

/** The registry of one attester: the AK the host registered for it. */
export function registeredAkOf(name: string, akPub: Uint8Array | undefined): QemuAkRegistry {
  return { registeredAk: async () => ({ attester: name, akPub }) };
}
