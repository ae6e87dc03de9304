/**
 * Secrets in logs (issue 7 §5): runs `confboot demo` (real swtpm, cryptsetup, attested TLS, key
 * service, metadata server; kubeadm and the Kubernetes API simulated) at debug level, collects
 * every secret it creates or has issued (master secret and salt, measurement salt and secret, init
 * secret, each state-disk key and initial passphrase, the bootstrap tokens of the join tickets) plus
 * every private key it wrote (kubelet keys, cluster CA keys), and searches every log line — the
 * pino file and the progress lines, and the printed summary — for each of them in every encoding
 * of ./search.ts. Zero hits allowed. A self-check plants secrets into a copy of the real log and
 * shows the search finds each encoding, so this test can fail.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPinoLogger } from '../../src/adapters/log/pino-logger.js';
import type { Logger } from '../../src/ports/logger.js';
import { renderSummary } from '../../src/testbed/cli/demo.js';
import { runDemo } from '../../src/testbed/demo/demo.js';
import type { DemoResult } from '../../src/testbed/demo/result.js';
import { formsOf, pemSecrets, type Secret, searchSecrets } from './search.js';

interface Run {
  result: DemoResult;
  workDir: string;
  progress: string[];
  secrets: Secret[];
  /** Every log source, read before the work dir is removed. */
  sources: Array<{ name: string; data: Buffer }>;
}

let run: Run | undefined;
let workDir: string | undefined;

/** Private keys and key files the demo wrote: PEM keys and raw key files, by relative path. */
function keyFilesUnder(dir: string): Array<{ path: string; data: Buffer }> {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && (/\.key$/.test(d.name) || /-key\.pem$/.test(d.name)))
    .map((d) => {
      const path = join(d.parentPath, d.name);
      return { path: path.slice(dir.length + 1), data: readFileSync(path) };
    })
    .sort((a, b) => a.path.localeCompare(b.path));
}

beforeAll(async () => {
  const progress: string[] = [];
  const secrets: Secret[] = [];
  try {
    const result = await runDemo({
      nodes: 2,
      tampered: 1,
      keep: true,
      logLevel: 'debug',
      progress: (l) => progress.push(l),
      onSecret: (kind, value) => {
        secrets.push({ kind, value: Buffer.from(value) });
        // A bootstrap token is `<id>.<secret>`; the secret half alone must not leak either.
        if (kind === 'bootstrap token') {
          const half = Buffer.from(value).toString('utf8').split('.')[1] ?? '';
          secrets.push({ kind: 'bootstrap token secret', value: Buffer.from(half) });
        }
      },
    });
    workDir = result.workDir;
    if (workDir === undefined || result.logFile === undefined) throw new Error('demo kept no work dir');
    for (const f of keyFilesUnder(workDir)) {
      if (f.data.toString('latin1').startsWith('-----BEGIN'))
        secrets.push(...pemSecrets(f.path, f.data.toString('utf8')));
      else secrets.push({ kind: f.path, value: f.data });
    }
    const sources = [
      { name: 'demo.log', data: readFileSync(result.logFile) },
      { name: 'progress', data: Buffer.from(progress.join('\n')) },
      { name: 'summary', data: Buffer.from(`${renderSummary(result)}\n${JSON.stringify(result)}`) },
    ];
    run = { result, workDir, progress, secrets, sources };
  } catch (err) {
    // Say why: the last warnings of the demo's own log (the log is what this test proves secret-free).
    const dir = workDir ?? /Work directory (\S+);/.exec(progress[0] ?? '')?.[1];
    const logFile = dir === undefined ? undefined : join(dir, 'demo.log');
    const warnings =
      logFile !== undefined && existsSync(logFile)
        ? readFileSync(logFile, 'utf8')
            .split('\n')
            .filter((l) => /"level":(40|50|60)/.test(l))
            .slice(-12)
        : [];
    throw new Error(
      `${(err as Error).message}\nprogress:\n${progress.join('\n')}\nlast demo warnings:\n${warnings.join('\n')}`,
      {
        cause: err,
      },
    );
  } finally {
    // keep: true returns the dir; a failed run only names it in the first progress line.
    workDir ??= /Work directory (\S+);/.exec(progress[0] ?? '')?.[1];
  }
}, 180_000);

afterAll(() => {
  if (workDir !== undefined) rmSync(workDir, { recursive: true, force: true });
  if (workDir !== undefined) expect(existsSync(workDir)).toBe(false);
});

function ran(): Run {
  if (!run) throw new Error('the demo did not run');
  return run;
}

describe('secrets in logs: confboot demo at debug level (kubeadm and the Kubernetes API simulated)', () => {
  it('the demo ran, logged at debug level, and every kind of secret was collected', () => {
    const { result, secrets, sources } = ran();
    expect(result.nodes.map((n) => [n.name, n.joined])).toEqual([
      ['control-plane-0', true],
      ['worker-1', true],
      ['worker-2', true],
      ['worker-3', false],
    ]);
    const log = sources[0]?.data.toString('utf8') ?? '';
    const lines = log.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(50);
    expect(lines.some((l) => JSON.parse(l).level === 20)).toBe(true); // debug lines present
    const kinds = secrets.map((s) => s.kind);
    for (const k of [
      'master secret',
      'master salt',
      'measurement salt',
      'measurement secret',
      'init secret',
      'worker-1 state disk key',
      'worker-2 state disk key',
      'worker-1 initial passphrase',
      'bootstrap token',
      'bootstrap token secret',
      'worker-1/kubelet/kubelet-client-key.pem (DER)',
      'worker-2/kubelet/kubelet-client-key.pem (private scalar)',
      'control-plane-0/etc-kubernetes/pki/ca.key (DER)',
    ])
      expect(kinds, k).toContain(k);
    expect(kinds.filter((k) => k === 'bootstrap token').length).toBeGreaterThanOrEqual(2);
  });

  it('no secret appears in any log line, in any encoding', () => {
    const { secrets, sources } = ran();
    const hits = searchSecrets(sources, secrets);
    expect(hits).toEqual([]);
    const forms = secrets.reduce((n, s) => n + formsOf(s.value).length, 0);
    const lines = sources.reduce((n, s) => n + s.data.toString('latin1').split('\n').length, 0);
    console.info(
      `[secrets] ${secrets.length} secrets × their encodings = ${forms} forms searched in ${lines} lines (${sources.map((s) => `${s.name} ${s.data.length} B`).join(', ')}): 0 hits`,
    );
  });

  it('self-check: a secret planted into a copy of the log is found in every encoding', () => {
    const { sources, secrets } = ran();
    const log = sources[0]?.data as Buffer;
    // 0xfb 0xef 0xff encode as "++//", so base64 and base64url differ; 32 bytes end in "=" padding.
    const planted = Buffer.concat([Buffer.from([0xfb, 0xef, 0xff]), randomBytes(29)]);
    const plantedSecret: Secret = { kind: 'planted', value: planted };
    expect(searchSecrets([{ name: 'copy', data: Buffer.from(log) }], [plantedSecret])).toEqual([]);
    const forms = formsOf(planted);
    const names = forms.map((f) => f.name);
    for (const expected of [
      'hex',
      'HEX',
      'base64',
      'base64-nopad',
      'base64url',
      'base64url-nopad',
      'base64-in-blob@1',
      'base64url-in-blob@2',
      'raw-bytes',
      'json-latin1',
      'json-buffer-data',
    ])
      expect(names).toContain(expected);
    for (const form of forms) {
      const line = Buffer.concat([
        Buffer.from('{"level":20,"msg":"Leaky","field":"prefix:'),
        form.bytes,
        Buffer.from(':suffix"}\n'),
      ]);
      const copy = Buffer.concat([log, line]);
      const hits = searchSecrets([{ name: 'copy', data: copy }], [plantedSecret]);
      expect(
        hits.map((h) => h.form),
        form.name,
      ).toContain(form.name);
      expect(
        hits.every((h) => h.line === log.toString('latin1').split('\n').length),
        form.name,
      ).toBe(true);
    }
    // Real ways of leaking, printed by the demo's own logger (pino at debug) into a copy of the log.
    // (Buffer and Uint8Array fields are not among them: with its redaction paths this logger prints
    // them as "[unable to serialize, …]"; their JSON forms are covered by the planted forms above.)
    const master = Buffer.from(secrets.find((s) => s.kind === 'master secret')?.value as Uint8Array);
    const kubeletPem = Buffer.from(
      secrets.find((s) => s.kind === 'worker-1/kubelet/kubelet-client-key.pem (PEM text)')
        ?.value as Uint8Array,
    ).toString('utf8');
    const token = Buffer.from(
      secrets.find((s) => s.kind === 'bootstrap token')?.value as Uint8Array,
    ).toString();
    const leaks: Array<[string, (l: Logger) => void]> = [
      ['a base64url field', (l) => l.debug('Leak', { blob: master.toString('base64url') })],
      [
        'a kms_uri',
        (l) => l.info('Leak', { uri: `cluster-kms://?key=${encodeURIComponent(master.toString('base64'))}` }),
      ],
      [
        'a blob holding the key',
        (l) =>
          l.info('Leak', {
            blob: Buffer.concat([Buffer.from([7]), master, Buffer.from([9, 9])]).toString('base64'),
          }),
      ],
      ['a PEM string field', (l) => l.warn('Leak', { pem: kubeletPem })],
      ['a message with the token', (l) => l.error(`kubeadm said: Using token: ${token}`)],
      [
        'an error message with hex',
        (l) => l.error('Leak', { error: `bad key ${master.toString('hex').toUpperCase()}` }),
      ],
    ];
    for (const [what, leak] of leaks) {
      const out = new PassThrough();
      const chunks: Buffer[] = [];
      out.on('data', (c: Buffer) => chunks.push(c));
      leak(createPinoLogger({ level: 'debug', destination: out }).child({ component: 'self-check' }));
      const copy = Buffer.concat([log, ...chunks]);
      expect(chunks.length, what).toBeGreaterThan(0);
      expect(searchSecrets([{ name: 'copy', data: copy }], secrets).length, what).toBeGreaterThan(0);
    }
  });
});
