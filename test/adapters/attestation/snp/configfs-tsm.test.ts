/** The configfs-tsm device against a temp directory laid out like /sys/kernel/config/tsm/report. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ConfigfsTsmDevice } from '../../../../src/adapters/attestation/snp/configfs-tsm.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { fakeEntry } from './configfs-entry.js';

const tmp = useTmpDirs('confboot-tsm-');

it('configfs-tsm (temp dir laid out like the kernel): writes inblob, returns outblob and auxblob', async () => {
  const root = tmp();
  const dir = fakeEntry(root, 'e0', 'sev_guest', Uint8Array.of(1, 2, 3), Uint8Array.of(9));
  const device = new ConfigfsTsmDevice({ kind: 'sev-snp', root, entry: 'e0' });
  const data = new Uint8Array(64).fill(0xab);
  const got = await device.getReport(data);
  expect(got).toEqual({ report: Uint8Array.of(1, 2, 3), auxBlob: Uint8Array.of(9) });
  expect(readFileSync(join(dir, 'inblob'))).toEqual(Buffer.from(data));
});

it('configfs-tsm refuses the wrong provider, wrong report-data size, and a missing entry layout', async () => {
  const root = tmp();
  fakeEntry(root, 'e0', 'sev_guest', Uint8Array.of(1));
  const tdx = new ConfigfsTsmDevice({ kind: 'tdx', root, entry: 'e0' });
  const err = await tdx.getReport(new Uint8Array(64)).catch((e: unknown) => e);
  expect(isConfbootError(err) && err.message).toContain('provider is "sev_guest", want tdx_guest');
  const short = await tdx.getReport(new Uint8Array(32)).catch((e: unknown) => e);
  expect(isConfbootError(short) && short.code).toBe('invalid-argument');
  // A plain directory is not configfs: mkdir works but no attributes appear.
  const fresh = new ConfigfsTsmDevice({ kind: 'tdx', root: tmp() });
  const e3 = await fresh.getReport(new Uint8Array(64)).catch((e: unknown) => e);
  expect(isConfbootError(e3) && e3.message).toMatch(
    /getting a tdx report through configfs-tsm .*confboot-[0-9a-f]{16}: .*ENOENT/,
  );
});
