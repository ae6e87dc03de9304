/**
 * Options from the environment (`CONFBOOT_<OPTION>`, src/app/program/args.ts) for the long-running
 * commands join-service, key-service, bootstrapper and metadata-server: precedence flag > env >
 * default, --help naming every variable, secrets refused as values, unknown variables warned about,
 * and `CONFBOOT_LOG_LEVEL=debug confboot join-service …` taking effect in a real process (built CLI).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { runBootstrapper } from '../../../src/app/cli/bootstrapper.js';
import { bootstrapperCommand } from '../../../src/app/cli/bootstrapper-options.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service-flags.js';
import { joinServiceCommand } from '../../../src/app/cli/join-service-spec.js';
import { keyServiceCommand, runKeyService } from '../../../src/app/cli/key-service.js';
import {
  METADATA_SERVER_COMMAND,
  run as runMetadataServer,
} from '../../../src/app/operator/metadata-server.js';
import {
  type CommandSpec,
  envName,
  parseCommand,
  renderHelp,
  UsageError,
} from '../../../src/app/program/args.js';
import { useTmpDirs } from '../../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const DIST_CLI = join(ROOT, 'dist/src/app/cli/main.js');
const tmp = useTmpDirs('confboot-cli-env-');

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

const spec: CommandSpec = {
  name: 'demo-service',
  summary: 'test spec',
  env: true,
  options: {
    listen: { type: 'string', valueName: 'HOST:PORT', default: '0.0.0.0:1', description: 'address' },
    'log-level': { type: 'string', default: 'info', description: 'level' },
    endpoint: { type: 'string', required: true, description: 'required one' },
    verbose: { type: 'boolean', description: 'a switch' },
    roots: { type: 'string', multiple: true, description: 'repeatable' },
    'master-secret-file': { type: 'string', secret: 'file', description: 'secret file' },
    token: { type: 'string', secret: 'value', description: 'a secret value' },
  },
};

function parse(argv: string[], env: Record<string, string>) {
  const warnings: string[] = [];
  const values = parseCommand(argv, spec, undefined, { env, warn: (l) => warnings.push(l) });
  return { values, warnings };
}

describe('parseCommand: a value that starts with a dash', () => {
  it('is refused as separate argument in one line that says how to write it, and read as --opt=-value', () => {
    // A base64url kid or token starts with '-' one time in 64.
    expect(() => parse(['--endpoint', '-abc'], {})).toThrow(
      "Option '--endpoint' argument is ambiguous: write a value that starts with a dash as --endpoint=-XYZ; see confboot demo-service --help",
    );
    expect(parse(['--endpoint=-abc'], {}).values?.endpoint).toBe('-abc');
  });
});

describe('CONFBOOT_<OPTION> in parseCommand', () => {
  it('names the variable CONFBOOT_ + upper case with underscores', () => {
    expect(envName('log-level')).toBe('CONFBOOT_LOG_LEVEL');
    expect(envName('master-secret-file')).toBe('CONFBOOT_MASTER_SECRET_FILE');
  });

  it('takes flag over env over default', () => {
    const env = { CONFBOOT_ENDPOINT: 'e:1', CONFBOOT_LOG_LEVEL: 'debug' };
    expect(parse([], env).values).toMatchObject({
      endpoint: 'e:1',
      'log-level': 'debug',
      listen: '0.0.0.0:1',
    });
    expect(parse(['--log-level', 'warn'], env).values).toMatchObject({ 'log-level': 'warn' });
    expect(parse(['--endpoint=x:2'], env).values).toMatchObject({ endpoint: 'x:2', 'log-level': 'debug' });
  });

  it('treats an empty variable as unset, parses booleans and comma lists', () => {
    const { values } = parse([], {
      CONFBOOT_ENDPOINT: 'e:1',
      CONFBOOT_LOG_LEVEL: '',
      CONFBOOT_VERBOSE: 'true',
      CONFBOOT_ROOTS: 'a.pem, b.pem,',
    });
    expect(values).toMatchObject({ 'log-level': 'info', verbose: true, roots: ['a.pem', 'b.pem'] });
    expect(parse([], { CONFBOOT_ENDPOINT: 'e', CONFBOOT_VERBOSE: '0' }).values?.verbose).toBe(false);
    expect(() => parse([], { CONFBOOT_ENDPOINT: 'e', CONFBOOT_VERBOSE: 'maybe' })).toThrow(
      /CONFBOOT_VERBOSE: want true or false, got "maybe"/,
    );
  });

  it('lets the environment satisfy a required option, and names the variable when both are missing', () => {
    expect(parse([], { CONFBOOT_ENDPOINT: 'e:1' }).values?.endpoint).toBe('e:1');
    expect(() => parse([], {})).toThrow(/missing required option --endpoint \(or CONFBOOT_ENDPOINT\)/);
  });

  it('accepts a secret file path from env but refuses the secret itself, even next to the flag', () => {
    expect(parse([], { CONFBOOT_ENDPOINT: 'e', CONFBOOT_MASTER_SECRET_FILE: '/s' }).values).toMatchObject({
      'master-secret-file': '/s',
    });
    for (const [env, message] of [
      [
        { CONFBOOT_MASTER_SECRET: 'hunter2hunter2hunter2' },
        /CONFBOOT_MASTER_SECRET: secrets are not read from the environment; write it to a file and set CONFBOOT_MASTER_SECRET_FILE or --master-secret-file/,
      ],
      [
        { CONFBOOT_TOKEN: 'hunter2' },
        /CONFBOOT_TOKEN: --token takes a secret, which is not read from the environment/,
      ],
    ] as const) {
      let thrown: unknown;
      try {
        parse(['--endpoint', 'e', '--master-secret-file', '/s', '--token', 't'], env);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(UsageError);
      expect(String(thrown)).toMatch(message);
      // The error names the variable, never its value.
      expect(String(thrown)).not.toMatch(/hunter2/);
    }
  });

  it('refuses key material put where a secret file path belongs, without echoing it', () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIGHAgEAhunter2\n-----END PRIVATE KEY-----\n';
    for (const value of [pem, 'hunter2\nhunter2']) {
      let thrown: unknown;
      try {
        parse(['--endpoint', 'e'], { CONFBOOT_MASTER_SECRET_FILE: value });
      } catch (err) {
        thrown = err;
      }
      expect(String(thrown)).toMatch(
        /CONFBOOT_MASTER_SECRET_FILE: --master-secret-file takes the path of a file holding a secret, and the variable looks like the secret itself/,
      );
      expect(String(thrown)).not.toMatch(/hunter2|BEGIN/);
    }
  });

  it('warns about (and ignores) unknown CONFBOOT_ variables, but not the test-suite knobs or other prefixes', () => {
    const { values, warnings } = parse([], {
      CONFBOOT_ENDPOINT: 'e',
      CONFBOOT_LOG_LEVL: 'debug',
      CONFBOOT_TESTVECTORS: '/v',
      CONFBOOT_FUZZ_SEED: '1',
      OTHER_LOG_LEVEL: 'x',
    });
    expect(values?.['log-level']).toBe('info');
    expect(warnings).toEqual(['confboot demo-service: ignoring CONFBOOT_LOG_LEVL: no option --log-levl']);
  });

  it('ignores the environment for commands that do not opt in', () => {
    const plain: CommandSpec = { ...spec, env: false };
    const warnings: string[] = [];
    expect(() =>
      parseCommand([], plain, undefined, { env: { CONFBOOT_ENDPOINT: 'e' }, warn: (l) => warnings.push(l) }),
    ).toThrow(/^missing required option --endpoint; see confboot .* --help$/);
    expect(renderHelp(plain)).not.toMatch(/CONFBOOT_/);
    expect(warnings).toEqual([]);
  });

  it('--help lists each variable and marks a secret value as not from env', () => {
    const help = renderHelp(spec);
    expect(help).toMatch(/--log-level VALUE .*\[CONFBOOT_LOG_LEVEL\]/);
    expect(help).toMatch(/--token VALUE .*\[not from env\]/);
    expect(help).toMatch(/Secrets are read only from files; refused: CONFBOOT_MASTER_SECRET\./);
  });
});

describe('the four long-running commands read CONFBOOT_<OPTION>', () => {
  it.each([
    ['join-service', joinServiceCommand],
    ['key-service', keyServiceCommand],
    ['metadata-server', METADATA_SERVER_COMMAND],
    ['bootstrapper', bootstrapperCommand()],
    ['bootstrapper (qemu entrypoint)', bootstrapperCommand('qemu')],
  ])('%s opts in and --help names the variable of every option', (_name, command) => {
    expect(command.env).toBe(true);
    const help = renderHelp(command);
    for (const [name, o] of Object.entries(command.options))
      expect(help, name).toContain(o.secret === 'value' ? '[not from env]' : `[${envName(name)}]`);
  });

  it('join-service: CONFBOOT_LOG_LEVEL=debug sets the level, --log-level beats it, every required flag can come from env', () => {
    const required = {
      CONFBOOT_CSP: 'qemu',
      CONFBOOT_ATTESTATION_VARIANT: 'qemu-vtpm',
      CONFBOOT_ATTESTATION_CONFIG: '/var/config/attestationConfig',
      CONFBOOT_MEASUREMENT_SALT_FILE: '/var/config/measurementSalt',
      CONFBOOT_KEY_SERVICE_ENDPOINT: 'key-service.kube-system:9000',
    };
    for (const [k, v] of Object.entries({
      ...required,
      CONFBOOT_LOG_LEVEL: 'debug',
      CONFBOOT_RATE_LIMIT: '3/s',
    }))
      vi.stubEnv(k, v);
    expect(parseJoinServiceFlags([])).toMatchObject({
      cloud: { cloud: 'qemu' },
      attestation: { variant: 'qemu-vtpm' },
      keyService: { endpoint: 'key-service.kube-system:9000' },
      logLevel: 'debug',
      limits: { rateLimit: 3 },
    });
    expect(parseJoinServiceFlags(['--log-level', 'warn', '--rate-limit=0'])).toMatchObject({
      logLevel: 'warn',
      limits: { rateLimit: 0 },
    });
    // A bad value from env is checked like the flag.
    vi.stubEnv('CONFBOOT_LOG_LEVEL', 'loud');
    expect(() => parseJoinServiceFlags([])).toThrow(/--log-level: want one of/);
    vi.stubEnv('CONFBOOT_LOG_LEVEL', '');
    vi.stubEnv('CONFBOOT_MEASUREMENT_SALT', 'not-a-file');
    expect(() => parseJoinServiceFlags([])).toThrow(/CONFBOOT_MEASUREMENT_SALT: secrets are not read/);
  });

  it('key-service starts from env alone and refuses CONFBOOT_MASTER_SECRET', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'ms'), randomBytes(32));
    writeFileSync(join(dir, 'salt'), randomBytes(32));
    vi.stubEnv('CONFBOOT_MASTER_SECRET_FILE', join(dir, 'ms'));
    vi.stubEnv('CONFBOOT_SALT_FILE', join(dir, 'salt'));
    vi.stubEnv('CONFBOOT_LISTEN', '127.0.0.1:0');
    const stop = new AbortController();
    let port = 0;
    const exit = runKeyService([], {
      signal: stop.signal,
      logger: silentLogger,
      onListening: (a) => {
        port = a.port;
        stop.abort();
      },
    });
    expect(await exit).toBe(0);
    expect(port).toBeGreaterThan(0);

    // mutual TLS key given as PEM text instead of a path
    vi.stubEnv('CONFBOOT_TLS_KEY', '-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----');
    await expect(runKeyService([], { signal: new AbortController().signal })).rejects.toThrow(
      /CONFBOOT_TLS_KEY: --tls-key takes the path of a file holding a secret/,
    );
    vi.stubEnv('CONFBOOT_TLS_KEY', '');
    vi.stubEnv('CONFBOOT_MASTER_SECRET', randomBytes(16).toString('hex'));
    await expect(runKeyService([], { signal: new AbortController().signal })).rejects.toThrow(
      /CONFBOOT_MASTER_SECRET: secrets are not read from the environment/,
    );
  });

  it('metadata-server starts from env alone', async () => {
    const leases = join(tmp(), 'leases');
    writeFileSync(leases, '');
    vi.stubEnv('CONFBOOT_LEASES', leases);
    vi.stubEnv('CONFBOOT_LISTEN', '127.0.0.1:0');
    const stop = new AbortController();
    let port = 0;
    const code = await runMetadataServer([], {
      signal: stop.signal,
      logger: silentLogger,
      onListening: (p) => {
        port = p;
        stop.abort();
      },
    });
    expect(code).toBe(0);
    expect(port).toBeGreaterThan(0);
  });

  it('bootstrapper takes --csp, --disk and the --check-wiring switch from env', async () => {
    vi.stubEnv('CONFBOOT_CSP', 'qemu');
    vi.stubEnv('CONFBOOT_DISK', '/nonexistent');
    vi.stubEnv('CONFBOOT_CHECK_WIRING', 'true');
    vi.stubEnv('CONFBOOT_LOG_LEVEL', 'silent');
    let out = '';
    const sink = {
      write: (c: string) => {
        out += c;
        return true;
      },
    } as unknown as NodeJS.WritableStream;
    expect(await runBootstrapper([], undefined, { out: sink })).toBe(0);
    expect(out).toMatch(/^Wiring of qemu\/qemu-vtpm resolves: \d+ bindings/);
    vi.stubEnv('CONFBOOT_INITIAL_PASSPHRASE', 'hunter2');
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(await runBootstrapper([], undefined, { out: sink })).toBe(2);
    expect(err.mock.calls.map((c) => String(c[0])).join('')).toMatch(
      /CONFBOOT_INITIAL_PASSPHRASE: secrets are not read from the environment; write it to a file and set CONFBOOT_INITIAL_PASSPHRASE_FILE/,
    );
  });
});

describe('CONFBOOT_LOG_LEVEL=debug confboot join-service … (a real process, built CLI)', () => {
  /** Runs the join service with a missing attestation config: it logs its configuration, then exits 1. */
  function runCli(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
    if (!existsSync(DIST_CLI)) throw new Error(`${DIST_CLI} is missing: run npm run build first`);
    const dir = tmp();
    writeFileSync(join(dir, 'salt'), randomBytes(32));
    const base = [
      'join-service',
      ...['--csp=qemu', '--attestation-variant=qemu-vtpm', `--attestation-config=${join(dir, 'missing')}`],
      ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9000'],
      ...['--api-server-endpoint=10.0.0.1:6443', '--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0'],
      '--trust-ak-as-carried',
    ];
    const childEnv = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('CONFBOOT_')),
    );
    return new Promise((done) => {
      execFile(
        process.execPath,
        [DIST_CLI, ...base, ...args],
        { cwd: ROOT, env: { ...childEnv, ...env }, timeout: 60_000 },
        (err, _stdout, stderr) =>
          done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr }),
      );
    });
  }
  const debugLines = (stderr: string) =>
    stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; logLevel?: string })
      .filter((e) => e.level === 20);

  it('logs at debug with the variable, not with --log-level info on top, and warns about a misspelt variable', async () => {
    const withEnv = await runCli([], { CONFBOOT_LOG_LEVEL: 'debug', CONFBOOT_LOGLEVEL: 'debug' });
    expect(withEnv.code).toBe(1);
    expect(withEnv.stderr).toMatch(/loading attestation config/);
    const lines = debugLines(withEnv.stderr);
    expect(lines.find((e) => e.msg === 'Configuration')).toMatchObject({ logLevel: 'debug' });
    expect(withEnv.stderr).toMatch(/confboot join-service: ignoring CONFBOOT_LOGLEVEL: no option --loglevel/);

    const flagWins = await runCli(['--log-level', 'info'], { CONFBOOT_LOG_LEVEL: 'debug' });
    expect(flagWins.code).toBe(1);
    expect(flagWins.stderr).toMatch(/loading attestation config/);
    expect(debugLines(flagWins.stderr)).toEqual([]);
  });
});
