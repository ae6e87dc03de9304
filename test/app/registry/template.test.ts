/**
 * Adding a cloud is one folder plus one registry line, and adding a vTPM variant is one entry: the
 * template provider (test/contract/template/, a complete provider for the imaginary "Example Cloud")
 * and a template vTPM variant are registered here through the registry's run-time hook — exactly
 * the line and the entry a contributor would add to src/app/registry/{clouds,variants}.ts — and
 * then every consumer is driven through its own public entry point: `join-service --help` and its
 * flag check, `bootstrapper --help` and `--check-wiring`, `confboot init --help`, `confboot
 * attestation verify --help` and its offline check, the node config,
 * the node container (the Issuer quotes on a REAL swtpm and the variant's validator accepts the
 * document), the join service's metadata (through the template's FAKE Example Cloud on loopback),
 * its validator builder and lookups, and the manifest generator. Nothing else is edited.
 */

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qemuVtpmChecks } from '../../../src/adapters/attestation/variants/qemu-vtpm.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { attestationVerifyCommand, verifyFromFlags } from '../../../src/app/cli/attestation-verify.js';
import { runBootstrapper } from '../../../src/app/cli/bootstrapper.js';
import { initCommand } from '../../../src/app/cli/init.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service-flags.js';
import { runManifests } from '../../../src/app/cli/manifests.js';
import {
  metadataApiFor,
  validatorBuilder,
  variantLookups,
} from '../../../src/app/join-service/production.js';
import { deployTargets, renderManifests } from '../../../src/app/manifests/manifests.js';
import { createNodeContainer } from '../../../src/app/modules/index.js';
import { renderHelp } from '../../../src/app/program/args.js';
import { cloud, registerCloud, registerVariant, vtpmVariant } from '../../../src/app/registry/index.js';
import { buildValidator } from '../../../src/app/registry/validators.js';
import { Issuer } from '../../../src/ports/issuer.js';
import { MetadataAPI } from '../../../src/ports/metadata-api.js';
import type { Variant } from '../../../src/ports/variant.js';
import {
  EXAMPLE_FAKE_TOKEN,
  type FakeExample,
  startFakeExample,
} from '../../contract/template/fake-example-server.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';

const CLOUD = 'example';
const VARIANT = 'example-vtpm' as Variant;
const OID = '1.3.9900.99.1';

const unregister: Array<() => void> = [];
beforeAll(() => {
  // The one registry entry of a cloud made from the template (src/app/registry/clouds.ts).
  unregister.push(
    registerCloud(
      CLOUD,
      cloud(
        () => import('../../contract/template/index.js'),
        (m, s) =>
          new m.ExampleMetadataAPI({
            ...(s.metadataUrl === undefined ? {} : { metadataBaseUrl: s.metadataUrl }),
            apiBaseUrl: s.apiEndpoint(),
            token: s.authToken,
            logger: s.logger,
          }),
        { variants: ['qemu-vtpm'] },
      ),
    ),
  );
  // The one entry of a vTPM variant (src/app/registry/variants.ts): qemu's checks under its own OID.
  unregister.push(
    registerVariant(
      VARIANT,
      vtpmVariant(VARIANT, { oid: OID, clouds: ['qemu'], checks: () => qemuVtpmChecks, eventLog: false }),
    ),
  );
});
afterAll(() => {
  for (const u of unregister.splice(0).reverse()) u();
});

function capture(): { out: NodeJS.WritableStream; text: () => string } {
  const chunks: string[] = [];
  const out = {
    write: (c: string | Uint8Array) => {
      chunks.push(typeof c === 'string' ? c : Buffer.from(c).toString('utf8'));
      return true;
    },
  } as unknown as NodeJS.WritableStream;
  return { out, text: () => chunks.join('') };
}

/** The line of `--flag` in a help text. */
function helpLine(help: string, flag: string): string {
  return help.split('\n').find((l) => l.trimStart().startsWith(`--${flag} `)) ?? '';
}

const JOIN_FLAGS = [
  '--attestation-config=/c',
  '--measurement-salt-file=/s',
  '--key-service-endpoint=127.0.0.1:9000',
];

describe('a template cloud (one folder + one registry line) appears everywhere', () => {
  it('in join-service --help and its --csp check', () => {
    const { out, text } = capture();
    expect(parseJoinServiceFlags(['--help'], out)).toBeUndefined();
    expect(helpLine(text(), 'cloud')).toMatch(/cloud provider: .*\bexample\b/);
    const flags = parseJoinServiceFlags([`--csp=${CLOUD}`, '--attestation-variant=qemu-vtpm', ...JOIN_FLAGS]);
    expect(flags?.cloud.cloud).toBe(CLOUD);
  });

  it('in bootstrapper --help, and a node of it resolves every binding (--check-wiring)', async () => {
    const help = capture();
    expect(await runBootstrapper(['--help'], undefined, { out: help.out })).toBe(0);
    expect(helpLine(help.text(), 'cloud')).toMatch(/cloud: .*\bexample\b/);
    const run = capture();
    const argv = ['--csp', CLOUD, '--check-wiring', '--disk', '/nonexistent', '--log-level', 'silent'];
    expect(await runBootstrapper(argv, undefined, { out: run.out })).toBe(0);
    expect(run.text()).toMatch(/^Wiring of example\/qemu-vtpm resolves: \d+ bindings/);
  });

  describe('its MetadataAPI reaches the FAKE Example Cloud', () => {
    let fake: FakeExample;
    const tmp = useTmpDirs('confboot-template-');
    beforeAll(async () => {
      fake = await startFakeExample();
      fake.state.instances = [
        {
          id: 'i-1',
          name: 'node-1',
          ip: '10.0.0.7',
          state: 'running',
          tags: { 'constellation-uid': 'u1', 'constellation-role': 'ControlPlane' },
        },
      ];
      fake.state.selfId = 'i-1';
    });
    afterAll(() => fake.server.close());

    it('from the join service (metadataApiFor) and from a node container', async () => {
      const tokenFile = join(tmp(), 'token');
      await writeFile(tokenFile, `${EXAMPLE_FAKE_TOKEN}\n`);
      const cloudApi = { endpoint: `${fake.server.url}/api`, authTokenFile: tokenFile };
      const service = await metadataApiFor(CLOUD, silentLogger, fake.server.url, cloudApi);
      expect((await service.self()).vpcIp).toBe('10.0.0.7');

      const container = await createNodeContainer({
        csp: CLOUD,
        variant: 'qemu-vtpm',
        diskDevice: '/nonexistent',
        logLevel: 'silent',
        metadata: { baseUrl: fake.server.url, apiEndpoint: cloudApi.endpoint, authTokenFile: tokenFile },
      });
      const node = await container.getAsync<MetadataAPI>(MetadataAPI);
      expect((await node.self()).name).toBe('node-1');
    });
  });

  it('in the manifest generator and manifests --help', async () => {
    expect(deployTargets()).toContainEqual({ cloud: CLOUD, variant: 'qemu-vtpm' });
    expect(renderManifests({ cloud: CLOUD, variant: 'qemu-vtpm' })).toContain(`--csp=${CLOUD}`);
    const { out, text } = capture();
    expect(await runManifests(['--help'], out)).toBe(0);
    expect(helpLine(text(), 'cloud')).toMatch(/\bexample\b/);
    expect(text()).toContain('example: qemu-vtpm');
  });
});

describe('a template vTPM variant (one entry) appears everywhere', () => {
  const swtpm = useSwtpm();
  const tmp = useTmpDirs('confboot-template-variant-');

  it('in join-service --help and its --attestation-variant check', () => {
    const { out, text } = capture();
    parseJoinServiceFlags(['--help'], out);
    expect(helpLine(text(), 'variant')).toContain(VARIANT);
    const flags = parseJoinServiceFlags(['--csp=qemu', `--attestation-variant=${VARIANT}`, ...JOIN_FLAGS]);
    expect(flags?.attestation.variant).toBe(VARIANT);
  });

  it('in bootstrapper --help and confboot init --help', async () => {
    const { out, text } = capture();
    await runBootstrapper(['--help'], 'qemu', { out });
    expect(helpLine(text(), 'variant')).toContain(VARIANT);
    expect(helpLine(renderHelp(initCommand), 'variant')).toContain(VARIANT);
  });

  it('in confboot attestation verify --help', () => {
    expect(helpLine(renderHelp(attestationVerifyCommand), 'variant')).toContain(VARIANT);
    // A cloud is not a variant: the template cloud does not appear there.
    expect(helpLine(renderHelp(attestationVerifyCommand), 'variant')).not.toMatch(/\bexample\b(?!-)/);
  });

  it('a qemu node issues it on a REAL swtpm and its validator (join service builder) accepts the document', {
    timeout: 60_000,
  }, async () => {
    const sw = await swtpm();
    const container = await createNodeContainer({
      csp: 'qemu',
      variant: VARIANT,
      tcti: sw.tcti,
      diskDevice: '/nonexistent',
      logLevel: 'silent',
    });
    const issuer = await container.getAsync<Issuer>(Issuer);
    expect([issuer.variant, issuer.oid]).toEqual([VARIANT, OID]);

    const clock = new SystemClock();
    // The node's boot chain (PCR 4) as measured, and the node lock (PCR 15) still zero.
    const tpm = new Tpm2ToolsTpm({ tcti: sw.tcti });
    await tpm.pcrEvent(4, new TextEncoder().encode('template image boot loader'));
    const pcr4 = Buffer.from((await tpm.readPcrs([4])).get(4) as Uint8Array).toString('hex');
    const config = Buffer.from(
      JSON.stringify({
        measurements: {
          '4': { expected: pcr4, warnOnly: false },
          '15': { expected: '00'.repeat(32), warnOnly: false },
        },
      }),
    );
    const build = validatorBuilder(VARIANT, await variantLookups(VARIANT, {}, clock), clock, silentLogger);
    const validator = build(config);
    expect([validator.variant, validator.oid]).toEqual([VARIANT, OID]);

    const userData = new Uint8Array(32).fill(7);
    const nonce = new Uint8Array(32).fill(9);
    const document = await issuer.issue(userData, nonce);
    const result = await validator.validate(document, nonce);
    expect(Buffer.from(result.userData).equals(Buffer.from(userData))).toBe(true);
    // Another nonce is refused: the validator really checks.
    await expect(validator.validate(document, new Uint8Array(32).fill(1))).rejects.toThrow();
    // The app-level builder knows it too.
    expect(buildValidator(VARIANT, config, { clock }).oid).toBe(OID);

    // And so does the offline verifier, `confboot attestation verify --variant example-vtpm`.
    const dir = tmp();
    await writeFile(join(dir, 'doc.json'), document);
    await writeFile(join(dir, 'config.json'), config);
    const flags = {
      document: join(dir, 'doc.json'),
      format: 'json' as const,
      variant: VARIANT,
      nonce: Buffer.from(nonce).toString('hex'),
      config: join(dir, 'config.json'),
    };
    const report = await verifyFromFlags(flags);
    expect([report.verdict, report.variant, report.userData]).toEqual([
      'accepted',
      VARIANT,
      Buffer.from(userData).toString('hex'),
    ]);
    const other = await verifyFromFlags({ ...flags, nonce: '01'.repeat(32) });
    expect(other.verdict).toBe('rejected');
  });

  it('in the manifest generator', () => {
    expect(deployTargets()).toContainEqual({ cloud: 'qemu', variant: VARIANT });
    expect(renderManifests({ cloud: 'qemu', variant: VARIANT })).toContain(
      `--attestation-variant=${VARIANT}`,
    );
  });
});
