/**
 * Test helper around the SIMULATED kubeadm (test/fixtures/fake-kubeadm/kubeadm): a temp directory
 * with its invocation log and attempt counter, the environment that points the fake at them, and a
 * reader for what it recorded.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** Directory holding the fake `kubeadm` executable (put it on PATH or use {@link FAKE_KUBEADM}). */
export const FAKE_KUBEADM_DIR = resolve(import.meta.dirname, '../../fixtures/fake-kubeadm');
/** Path of the fake `kubeadm` executable. */
export const FAKE_KUBEADM = join(FAKE_KUBEADM_DIR, 'kubeadm');

/** One invocation as the fake recorded it. */
export interface KubeadmInvocation {
  argv: string[];
  subcommand?: string;
  configPath?: string;
  /** Octal file mode of the config file, e.g. "600". */
  configMode?: string;
  // biome-ignore lint/suspicious/noExplicitAny: parsed YAML of arbitrary shape; tests read nested fields
  documents?: Array<Record<string, any>>;
  attempt?: number;
  outcome: 'ok' | 'failed' | 'invalid' | 'usage';
  message?: string;
}

/** A private world for one simulated kubeadm. Call {@link FakeKubeadmWorld.cleanup} afterwards. */
export class FakeKubeadmWorld {
  readonly dir = mkdtempSync(join(tmpdir(), 'confboot-fake-kubeadm-'));
  readonly logPath = join(this.dir, 'invocations.jsonl');
  readonly counterPath = join(this.dir, 'attempts');
  readonly adminConfPath = join(this.dir, 'etc-kubernetes', 'admin.conf');
  /** The environment for kubeadm; mutable, read at each run. */
  readonly env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    FAKE_KUBEADM_LOG: this.logPath,
    FAKE_KUBEADM_COUNTER: this.counterPath,
    FAKE_KUBEADM_ADMIN_CONF: this.adminConfPath,
  };

  /** The next `times` valid invocations fail. */
  failTimes(times: number): void {
    rmSync(this.counterPath, { force: true });
    this.env.FAKE_KUBEADM_FAIL_TIMES = String(times);
  }

  /** Everything the fake recorded, in order. */
  invocations(): KubeadmInvocation[] {
    if (!existsSync(this.logPath)) return [];
    return readFileSync(this.logPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as KubeadmInvocation);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
