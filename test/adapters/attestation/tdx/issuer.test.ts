/** The qemu-tdx issuer on a configfs-tsm device in a temp directory laid out like the kernel's. */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ConfigfsTsmDevice } from '../../../../src/adapters/attestation/snp/configfs-tsm.js';
import { QemuTdxIssuer } from '../../../../src/adapters/attestation/tdx/issuer.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { fakeEntry } from '../snp/configfs-entry.js';

const tmp = useTmpDirs('confboot-tsm-');

it('qemu-tdx issuer: report data = SHA256(userData ‖ nonce) padded, document {RawQuote, UserData}', async () => {
  const root = tmp();
  const quote = Uint8Array.from({ length: 100 }, (_, i) => i);
  const dir = fakeEntry(root, 'q', 'tdx_guest', quote);
  const issuer = new QemuTdxIssuer(
    new ConfigfsTsmDevice({ kind: 'tdx', root, entry: 'q' }),
    variantOid('qemu-tdx'),
  );
  const userData = Buffer.from('tls-spki-hash');
  const nonce = Buffer.alloc(32, 3);
  const doc = JSON.parse(Buffer.from(await issuer.issue(userData, nonce)).toString('utf8')) as {
    RawQuote: string;
    UserData: string;
  };
  expect(Buffer.from(doc.RawQuote, 'base64')).toEqual(Buffer.from(quote));
  expect(Buffer.from(doc.UserData, 'base64')).toEqual(userData);
  const inblob = readFileSync(join(dir, 'inblob'));
  expect(inblob.subarray(0, 32)).toEqual(createHash('sha256').update(userData).update(nonce).digest());
  expect(inblob.subarray(32).every((b) => b === 0)).toBe(true);
  expect(
    () => new QemuTdxIssuer(new ConfigfsTsmDevice({ kind: 'sev-snp', root }), variantOid('qemu-tdx')),
  ).toThrow(/needs a TDX device/);
});
