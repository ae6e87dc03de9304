/**
 * The qemu-vtpm attestation keys a QEMU cluster's host registered, read from the QEMU metadata
 * server's identities file (`{"<hostname>": {"attestationKeyPublic": "<base64 TPMT_PUBLIC>"}}`,
 * as `confboot mini` writes it), re-read on every validation so VMs added later are known. The
 * validator cannot tell which VM is calling, so a document's AK must be one of the registered
 * ones: a TPM the host did not provision is refused, but one registered VM's AK is not bound to
 * its own address.
 */
import { readFile } from 'node:fs/promises';
import type { QemuAkRegistry } from '../../attestation/variants/qemu-vtpm.js';

/** {@link QemuAkRegistry} over an identities file. */
export class FileQemuAkRegistry implements QemuAkRegistry {
  constructor(private readonly path: string) {}

  async registeredAk(): Promise<readonly Uint8Array[]> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(this.path, 'utf8'));
    } catch (err) {
      throw new Error(`reading the registered attestation keys ${this.path}: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new Error(`${this.path}: expected a JSON object of identities`);
    const out: Uint8Array[] = [];
    for (const identity of Object.values(parsed as Record<string, unknown>)) {
      const ak = (identity as { attestationKeyPublic?: unknown } | null)?.attestationKeyPublic;
      if (typeof ak === 'string' && ak !== '') out.push(new Uint8Array(Buffer.from(ak, 'base64')));
    }
    return out;
  }

  describe(): string {
    return `a VM registered in ${this.path}`;
  }
}
