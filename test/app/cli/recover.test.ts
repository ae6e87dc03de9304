/**
 * `confboot recover` reads its inputs as `confboot init` does (src/app/cli/operator-inputs.ts): the
 * master secret or a share goes only to a node whose attestation config proves its image, so a weak
 * config is a usage error before any connection (the endpoint below accepts none). The AK rule
 * (--variant, --qemu-ak-registry) is tested in test/app/cli/operator-inputs.test.ts.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { run } from '../../../src/app/cli/recover.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-recover-cli-');
afterEach(() => vi.restoreAllMocks());

function capture(): { err: () => string } {
  const chunks: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    chunks.push(String(c));
    return true;
  });
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  return { err: () => chunks.join('') };
}

it.each([
  ['only PCR 15', { 15: { expected: '00'.repeat(32), warnOnly: false } }],
  ['no PCR 15', { 4: { expected: 'ab'.repeat(32), warnOnly: false } }],
])('a config that enforces %s: exits 2 naming the opt-in, before connecting', async (_name, measurements) => {
  const dir = tmp();
  const config = join(dir, 'att.json');
  const secret = join(dir, 'master.json');
  await writeFile(config, JSON.stringify({ measurements }));
  await writeFile(secret, JSON.stringify({ key: 'a'.repeat(44), salt: 'b'.repeat(44) }));
  const io = capture();
  const argv = [
    ...['--endpoint', '127.0.0.1:1', '--attestation-config', config, '--master-secret-file', secret],
    ...['--variant', 'qemu-vtpm', '--qemu-ak-registry', join(dir, 'ak-registry.json')],
  ];
  expect(await run(argv)).toBe(2);
  expect(io.err()).toContain('pass --allow-weak-measurement-policy to accept this knowingly');
  expect(io.err()).not.toMatch(/Connecting to/);
});

it('refuses a master-secret file that is not {"key","salt"} as init does', async () => {
  const dir = tmp();
  const config = join(dir, 'att.json');
  const secret = join(dir, 'master.json');
  await writeFile(
    config,
    JSON.stringify({
      measurements: {
        4: { expected: 'ab'.repeat(32), warnOnly: false },
        15: { expected: '00'.repeat(32), warnOnly: false },
      },
    }),
  );
  await writeFile(secret, 'not json');
  const io = capture();
  expect(
    await run([
      ...['--endpoint', '127.0.0.1:1', '--attestation-config', config, '--master-secret-file', secret],
      ...['--variant', 'qemu-vtpm', '--qemu-ak-registry', join(dir, 'ak-registry.json')],
    ]),
  ).toBe(2);
  expect(io.err()).toContain('--master-secret-file is not JSON {"key","salt"}');
});
