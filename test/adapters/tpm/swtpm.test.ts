import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { handles, tpm2 } from './tpm-test-helpers.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('startSwtpm', () => {
  const swtpm = useSwtpm();
  const tmp = useTmpDirs();

  it('runs a started TPM that tpm2-tools can use at once', async () => {
    const s = await swtpm();
    expect(s.ctrlPort).toBe(s.port + 1);
    expect(s.tcti).toBe(`swtpm:host=127.0.0.1,port=${s.port}`);
    const out = await tpm2(s.tcti, 'tpm2_getcap', ['properties-fixed']);
    expect(out).toContain('TPM2_PT_FAMILY_INDICATOR');
  });

  it('stop kills swtpm and removes the state dir it created, and is idempotent', async () => {
    const s = await startSwtpm();
    expect(alive(s.pid)).toBe(true);
    expect(existsSync(s.stateDir)).toBe(true);
    await s.stop();
    await s.stop();
    expect(alive(s.pid)).toBe(false);
    expect(existsSync(s.stateDir)).toBe(false);
  });

  it('keeps a caller-given state dir, so persistent TPM objects survive a restart', async () => {
    const dir = tmp();
    const first = await startSwtpm({ stateDir: dir });
    const ctx = `${dir}/primary.ctx`;
    await tpm2(first.tcti, 'tpm2_createprimary', ['-C', 'o', '-c', ctx]);
    await tpm2(first.tcti, 'tpm2_evictcontrol', ['-C', 'o', '-c', ctx, '0x81000001']);
    await first.stop();
    expect(existsSync(dir)).toBe(true);
    const second = await swtpm({ stateDir: dir });
    expect(await handles(second.tcti, 'persistent')).toContain(0x81000001);
  });

  it('runs several instances side by side on distinct ports', async () => {
    const [a, b] = await Promise.all([swtpm(), swtpm()]);
    expect(a?.port).not.toBe(b?.port);
    expect(a?.stateDir).not.toBe(b?.stateDir);
  });

  it('fails with the reason when swtpm cannot be started', async () => {
    await expect(startSwtpm({ swtpmPath: '/nonexistent/swtpm' })).rejects.toThrow(/starting swtpm: .*ENOENT/);
  });
});
