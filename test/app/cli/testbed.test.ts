/**
 * `confboot mini` and `confboot demo` load the testbed (src/testbed) lazily; where it is absent (the
 * npm package) they print one line and exit 2, and every other failure to load still surfaces.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  isMissingModule,
  loadTestbedCommand,
  loadTestbedModule,
  testbedMissingLine,
} from '../../../src/app/cli/testbed.js';
import { useTmpDirs } from '../../support/tmp.js';

const root = resolve(import.meta.dirname, '../../..');

afterEach(() => {
  vi.restoreAllMocks();
});

/** The error Node's own loader gives for `import(url)` of a file that does not exist. */
function nodeImportError(url: URL): { code: string; url?: string; message: string } {
  const script = `import(${JSON.stringify(url.href)}).catch((e) => process.stdout.write(JSON.stringify({ code: e.code, url: e.url, message: e.message })));`;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(child.stdout) as { code: string; url?: string; message: string };
}

function captureStderr(): { text: () => string } {
  let out = '';
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  });
  return { text: () => out };
}

describe('the testbed commands', () => {
  const tmp = useTmpDirs('confboot-testbed-');

  it.each(['mini', 'demo'] as const)('load the testbed in a clone: %s', async (name) => {
    // The real command module: its `run` and its command specs (the stand-in has `run` alone).
    const mod = await loadTestbedCommand(name);
    expect(mod.run).toBeTypeOf('function');
    expect(Object.keys(mod).length).toBeGreaterThan(1);
  });

  it("recognise Node's error for the missing module itself, not for a module it imports", () => {
    const dir = tmp();
    const missing = pathToFileURL(join(dir, 'testbed', 'cli', 'mini.js'));
    const err = nodeImportError(missing);
    expect(err.code).toBe('ERR_MODULE_NOT_FOUND');
    expect(isMissingModule(err, missing)).toBe(true);
    expect(isMissingModule({ ...err, url: undefined }, missing)).toBe(true);
    expect(isMissingModule(err, pathToFileURL(join(dir, 'testbed', 'cli', 'demo.js')))).toBe(false);
    expect(isMissingModule(new Error('boom'), missing)).toBe(false);
  });

  it('stand in with one line and exit 2 when the testbed is missing', async () => {
    const url = pathToFileURL(join(tmp(), 'mini.js'));
    const mod = await loadTestbedModule('mini', url, () =>
      Promise.reject(
        Object.assign(new Error(`Cannot find module '${fileURLToPath(url)}'`), {
          code: 'ERR_MODULE_NOT_FOUND',
        }),
      ),
    );
    const err = captureStderr();
    expect(await mod.run(['up'])).toBe(2);
    expect(err.text()).toBe(`${testbedMissingLine('mini')}\n`);
    expect(err.text().trim().split('\n')).toHaveLength(1);
  });

  it('surface any other failure to load', async () => {
    const url = pathToFileURL(join(tmp(), 'mini.js'));
    const inside = Object.assign(new Error("Cannot find package 'esbuild' imported from /x/mini.js"), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
    await expect(loadTestbedModule('mini', url, () => Promise.reject(inside))).rejects.toBe(inside);
    const broken = new SyntaxError('Unexpected token');
    await expect(loadTestbedModule('mini', url, () => Promise.reject(broken))).rejects.toBe(broken);
  });

  // The built CLI without dist/src/testbed, as the npm package ships it.
  const built = join(root, 'dist/src/app/cli/testbed.js');
  it.runIf(existsSync(built))('the built CLI without the testbed: --help lists them, each exits 2', () => {
    const copy = tmp();
    const dist = join(root, 'dist/src');
    cpSync(dist, join(copy, 'src'), {
      recursive: true,
      filter: (p) => relative(dist, p).split(sep)[0] !== 'testbed',
    });
    writeFileSync(join(copy, 'package.json'), '{ "type": "module" }\n');
    expect(existsSync(join(copy, 'src/testbed'))).toBe(false);
    const main = join(copy, 'src/app/cli/main.js');
    const help = spawnSync(process.execPath, [main, '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^ {2}mini {2}/m);
    expect(help.stdout).toMatch(/^ {2}demo {2}/m);
    for (const name of ['mini', 'demo']) {
      const r = spawnSync(process.execPath, [main, name, 'up'], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe(`${testbedMissingLine(name)}\n`);
      expect(r.stdout).toBe('');
    }
  });
});
