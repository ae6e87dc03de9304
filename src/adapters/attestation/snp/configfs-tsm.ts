/**
 * ConfidentialGuestDevice over the Linux configfs-tsm report interface
 * (`/sys/kernel/config/tsm/report`, Documentation/ABI/testing/configfs-tsm): create an entry
 * directory (or reuse one), write 64 bytes of report data to `inblob`, read `outblob` (SNP report or
 * TDX quote) and `auxblob` (SNP certificate table), and compare `generation` before and after to
 * catch a concurrent writer. `provider` must name the expected driver (`sev_guest` / `tdx_guest`).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConfidentialGuestDevice, GuestReport } from '../../../ports/confidential-guest-device.js';
import { ConfbootError, messageOf } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';

/** Options of {@link ConfigfsTsmDevice}. */
export interface ConfigfsTsmOptions {
  /** `sev-snp` or `tdx`. */
  kind: 'sev-snp' | 'tdx';
  /** The report directory. Default `/sys/kernel/config/tsm/report`. */
  root?: string;
  /** Reuse this existing entry (name under root) instead of creating and removing one per request. */
  entry?: string;
}

const PROVIDERS = { 'sev-snp': 'sev_guest', tdx: 'tdx_guest' } as const;

/** Gets SNP reports or TDX quotes through configfs-tsm. */
export class ConfigfsTsmDevice implements ConfidentialGuestDevice {
  readonly kind: 'sev-snp' | 'tdx';
  private readonly root: string;
  private readonly entry: string | undefined;

  constructor(options: ConfigfsTsmOptions) {
    this.kind = options.kind;
    this.root = options.root ?? '/sys/kernel/config/tsm/report';
    this.entry = options.entry;
  }

  async getReport(reportData: Uint8Array, options?: CallOptions): Promise<GuestReport> {
    if (reportData.length !== 64)
      throw new ConfbootError(
        'invalid-argument',
        `configfs-tsm: report data is ${reportData.length} bytes, want 64`,
      );
    options?.signal?.throwIfAborted();
    const dir = join(this.root, this.entry ?? `confboot-${randomBytes(8).toString('hex')}`);
    const op = `getting a ${this.kind} report through configfs-tsm ${dir}`;
    let created = false;
    try {
      if (this.entry === undefined) {
        await mkdir(dir);
        created = true;
      }
      const provider = (await readFile(join(dir, 'provider'), 'utf8')).trim();
      if (provider !== PROVIDERS[this.kind])
        throw new Error(`provider is ${JSON.stringify(provider)}, want ${PROVIDERS[this.kind]}`);
      await writeFile(join(dir, 'inblob'), reportData);
      const before = (await readFile(join(dir, 'generation'), 'utf8')).trim();
      const report = new Uint8Array(await readFile(join(dir, 'outblob')));
      let auxBlob: Uint8Array | undefined;
      try {
        const aux = await readFile(join(dir, 'auxblob'));
        if (aux.length > 0) auxBlob = new Uint8Array(aux);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      const after = (await readFile(join(dir, 'generation'), 'utf8')).trim();
      if (before !== after)
        throw new Error(`entry was written concurrently (generation ${before} → ${after})`);
      if (report.length === 0) throw new Error('outblob is empty');
      return auxBlob === undefined ? { report } : { report, auxBlob };
    } catch (err) {
      throw new ConfbootError('unavailable', `${op}: ${messageOf(err)}`, {
        cause: err,
        recoverable: false,
      });
    } finally {
      // On configfs, rmdir removes an entry with its attributes; a failure here must not hide the result.
      if (created) await rmdir(dir).catch(() => undefined);
    }
  }
}
