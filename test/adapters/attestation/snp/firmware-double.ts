/**
 * TEST DOUBLES of the confidential-guest firmware behind the kernel's configfs-tsm report interface
 * (no SEV-SNP or TDX hardware exists on this machine), read through the REAL ConfigfsTsmDevice:
 *  - {@link ConfigfsTsmDouble}: an entry directory with `provider`, `generation`, `inblob`,
 *    `auxblob` and a FIFO `outblob`; each time a reader opens `outblob`, the double reads `inblob`
 *    and answers with whatever its `answer` makes of it (a TDX quote, for example);
 *  - {@link SnpFirmwareDouble}: the SEV-SNP firmware, answering with a report over `inblob` signed
 *    by a FAKE AMD VCEK/VLEK (fake-amd-pki.ts), `auxblob` being the host's certificate table.
 * Used by the SEV-SNP issuer tests and the SNP/TDX attestation contract test.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  encodeSnpCertTable,
  SNP_CERT_TABLE_GUIDS,
  type SnpCertTableEntry,
} from '../../../../src/adapters/attestation/snp/cert-table.js';
import { ConfigfsTsmDevice } from '../../../../src/adapters/attestation/snp/configfs-tsm.js';
import type {
  ConfidentialGuestDevice,
  GuestReport,
} from '../../../../src/ports/confidential-guest-device.js';
import type { CallOptions } from '../../../../src/ports/types.js';
import { buildFakeReport, type FakeAmdPki } from './fake-amd-pki.js';

const run = promisify(execFile);
const der = (pem: string) => Uint8Array.from(new X509Certificate(pem).raw);

/** Certificate-table entries (the host's `auxblob`) from a fake AMD PKI. */
export function table(
  pki: FakeAmdPki,
  kinds: ('vcek' | 'vlek' | 'ask' | 'asvk' | 'ark')[],
): SnpCertTableEntry[] {
  const pem = { vcek: pki.vcekPem, vlek: pki.vlekPem, ask: pki.askPem, asvk: pki.asvkPem, ark: pki.arkPem };
  return kinds.map((k) => ({
    guid: SNP_CERT_TABLE_GUIDS[k === 'asvk' ? 'ask' : k],
    data: der(pem[k]),
  }));
}

/** Turns the bytes written to `inblob` into what `outblob` returns. */
export type TsmAnswer = (inblob: Buffer) => Uint8Array;

const PROVIDERS = { 'sev-snp': 'sev_guest', tdx: 'tdx_guest' } as const;

/**
 * TEST DOUBLE of one configfs-tsm report entry in a temp dir. Each time a reader opens `outblob`
 * (a FIFO), the double reads `inblob`, records it in {@link requests} and writes `answer(inblob)`.
 */
export class ConfigfsTsmDouble {
  readonly root: string;
  readonly entry = 'e0';
  private readonly dir: string;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  /** The `inblob` of every request served, in order. */
  readonly requests: Buffer[] = [];
  /** Errors of the double itself (must stay empty). */
  readonly errors: unknown[] = [];

  constructor(
    readonly kind: 'sev-snp' | 'tdx',
    private readonly answerFn?: TsmAnswer,
  ) {
    this.root = mkdtempSync(join(tmpdir(), 'confboot-configfs-tsm-'));
    this.dir = join(this.root, this.entry);
    mkdirSync(this.dir);
    writeFileSync(join(this.dir, 'provider'), `${PROVIDERS[kind]}\n`);
    writeFileSync(join(this.dir, 'generation'), '1\n');
    writeFileSync(join(this.dir, 'inblob'), '');
    writeFileSync(join(this.dir, 'auxblob'), '');
  }

  /** What `outblob` returns for `inblob`; subclasses override it. */
  protected answer(inblob: Buffer): Uint8Array {
    if (this.answerFn === undefined) throw new Error('configfs-tsm double: no answer configured');
    return this.answerFn(inblob);
  }

  /** Creates the `outblob` FIFO and starts answering. */
  async start(): Promise<void> {
    await run('mkfifo', [join(this.dir, 'outblob')]);
    this.loop = this.serve();
  }

  /** Sets `auxblob` (empty: none). */
  setAuxblob(bytes: Uint8Array): void {
    writeFileSync(join(this.dir, 'auxblob'), bytes);
  }

  /** The REAL ConfigfsTsmDevice on this entry. */
  device(): ConfigfsTsmDevice {
    return new ConfigfsTsmDevice({ kind: this.kind, root: this.root, entry: this.entry });
  }

  /**
   * The REAL ConfigfsTsmDevice on this entry, its requests queued: one entry serves one request at
   * a time (on a guest the kernel's `generation` check refuses interleaved writers; production
   * creates an entry per request), so issuers sharing the entry may issue concurrently.
   */
  queuedDevice(): ConfidentialGuestDevice {
    const device = this.device();
    return {
      kind: device.kind,
      getReport: (reportData: Uint8Array, options?: CallOptions): Promise<GuestReport> => {
        const next = this.queue.then(() => device.getReport(reportData, options));
        this.queue = next.catch(() => undefined);
        return next;
      },
    };
  }

  private async serve(): Promise<void> {
    const outblob = join(this.dir, 'outblob');
    while (!this.stopped) {
      const out = await open(outblob, 'w'); // waits for a reader
      try {
        if (this.stopped) return;
        const inblob = await readFile(join(this.dir, 'inblob'));
        this.requests.push(inblob);
        await out.write(this.answer(inblob));
        // Swap in a fresh FIFO before closing this one, so the next reader cannot attach to it.
        const next = join(this.dir, '.outblob.next');
        await run('mkfifo', [next]);
        await rename(next, outblob);
      } catch (err) {
        this.errors.push(err); // the reader sees an empty outblob; the next request is served again
      } finally {
        await out.close();
      }
    }
  }

  /** Stops serving: releases a writer waiting for a reader and any reader waiting for a writer. */
  async stop(): Promise<void> {
    this.stopped = true;
    const outblob = join(this.dir, 'outblob');
    const held = [];
    for (const flags of [
      constants.O_RDONLY | constants.O_NONBLOCK,
      constants.O_WRONLY | constants.O_NONBLOCK,
    ])
      held.push(await open(outblob, flags).catch(() => undefined));
    try {
      await this.loop;
    } finally {
      await Promise.all(held.map((h) => h?.close()));
      rmSync(this.root, { recursive: true, force: true });
    }
  }
}

/**
 * TEST DOUBLE of the SEV-SNP firmware: answers with a report over `inblob`, signed by `chip`'s
 * FAKE VCEK/VLEK. `stale` answers with a report over zero report data instead.
 */
export class SnpFirmwareDouble extends ConfigfsTsmDouble {
  chip: FakeAmdPki;
  signingKey: 'vcek' | 'vlek' = 'vlek';
  stale = false;

  constructor(chip: FakeAmdPki) {
    super('sev-snp');
    this.chip = chip;
  }

  protected override answer(reportData: Buffer): Uint8Array {
    return buildFakeReport(this.chip, {
      signingKey: this.signingKey,
      reportData: this.stale ? new Uint8Array(64) : reportData,
    });
  }

  /** The certificate table the "host" supplies (auxblob); none when empty. */
  setTable(entries: SnpCertTableEntry[]): void {
    this.setAuxblob(entries.length === 0 ? new Uint8Array() : encodeSnpCertTable(entries));
  }
}
