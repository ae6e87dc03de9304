/**
 * The node containers: for every cloud and each variant it can issue, the common module plus the
 * cloud module resolve every token (no hardware touched: adapters connect lazily), singletons are
 * shared, another cloud's variants and the test-only `dummy` variant cannot be selected, and the one-line OpenStack provider reaches a FAKE OpenStack (no OpenStack here) through
 * the settings of the node config.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AZURE_HCL_AK_HANDLE } from '../../../src/adapters/attestation/azure/nv-reader.js';
import { QemuTdxIssuer } from '../../../src/adapters/attestation/tdx/issuer.js';
import { VtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { AwsMetadataAPI } from '../../../src/adapters/cloud/aws/metadata-api.js';
import { AzureMetadataAPI } from '../../../src/adapters/cloud/azure/metadata-api.js';
import { GcpMetadataAPI } from '../../../src/adapters/cloud/gcp/metadata-api.js';
import { QemuMetadataAPI } from '../../../src/adapters/cloud/qemu/metadata-api.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import type { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import type { BootstrapperNodeDeps } from '../../../src/app/bootstrapper/node.js';
import {
  BootstrapperDeps,
  bootstrapperDeps,
  CSPS,
  type Csp,
  checkWiring,
  cloudVariants,
  createNodeContainer,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  ISSUER_VARIANTS_BY_CSP,
  NODE_TOKENS,
  nodeConfig,
  providerSettings,
  SharedNodeLock,
  VARIANTS_BY_CSP,
} from '../../../src/app/modules/index.js';
import { LazyMetadataAPI } from '../../../src/app/registry/cloud-entry.js';
import { CLOUDS, variantOid } from '../../../src/app/registry/index.js';
import { NodeLock } from '../../../src/domain/node-lock.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { Issuer } from '../../../src/ports/issuer.js';
import { MetadataAPI } from '../../../src/ports/metadata-api.js';
import { Random } from '../../../src/ports/random.js';
import { Tpm } from '../../../src/ports/tpm.js';
import { PRODUCTION_VARIANTS, VARIANT_NAMES } from '../../../src/ports/variant.js';
import {
  type FakeOpenStack,
  OPENSTACK_FAKE_TOKEN,
  startFakeOpenStack,
} from '../../adapters/cloud/openstack/fake-openstack-server.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-modules-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The adapter class of each cloud; undefined: it needs settings to be built (OpenStack, below). */
const METADATA_CLASS: Record<Csp, (abstract new (...args: never[]) => unknown) | undefined> = {
  gcp: GcpMetadataAPI,
  azure: AzureMetadataAPI,
  aws: AwsMetadataAPI,
  qemu: QemuMetadataAPI,
  openstack: undefined,
};

const cases = CSPS.flatMap((csp) => cloudVariants(csp).map((variant) => ({ csp, variant })));

describe('node containers', () => {
  it.each(cases)(
    '$csp with $variant: every token resolves, with the cloud adapter and variant',
    async ({ csp, variant }) => {
      const container = await createNodeContainer({
        csp,
        variant,
        diskDevice: '/nonexistent/state.img',
        tcti: 'swtpm:host=127.0.0.1,port=1',
        logLevel: 'silent',
      });
      expect(await checkWiring(container)).toHaveLength(NODE_TOKENS.length);
      // Every cloud's MetadataAPI imports and builds its adapter on first use.
      const metadata = await container.getAsync(MetadataAPI);
      expect(metadata).toBeInstanceOf(LazyMetadataAPI);
      const adapterClass = METADATA_CLASS[csp];
      if (adapterClass) expect(await (metadata as LazyMetadataAPI).adapter()).toBeInstanceOf(adapterClass);
      const issuer = await container.getAsync<Issuer>(Issuer);
      expect(issuer.variant).toBe(variant);
      expect(issuer).toBeInstanceOf(variant === 'qemu-tdx' ? QemuTdxIssuer : VtpmIssuer);
      const deps = await container.getAsync<BootstrapperNodeDeps>(BootstrapperDeps);
      // Singletons: the deps hold the very instances the container hands out.
      expect(deps.lock).toBe(await container.getAsync(SharedNodeLock));
      expect(deps.lock).toBeInstanceOf(NodeLock);
      expect(deps.issuer).toBe(issuer);
      expect(await container.getAsync(Tpm)).toBe(await container.getAsync(Tpm));
    },
  );

  it('the node Random gives floats in [0, 1) (jittered retries depend on it)', async () => {
    const container = await createNodeContainer({ csp: 'qemu', variant: 'qemu-vtpm', diskDevice: '/d' });
    const random = await container.getAsync<Random>(Random);
    for (let i = 0; i < 100; i++) {
      const f = random.float();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
    }
  });

  it('one binding can be replaced before resolving (docs/embedding.md, recipe C)', async () => {
    const container = await createNodeContainer({ csp: 'qemu', variant: 'qemu-vtpm', diskDevice: '/d' });
    const mine = new FakeMetadataAPI();
    container.rebind<MetadataAPI>(MetadataAPI).toConstantValue(mine);
    expect((await bootstrapperDeps(container)).metadata).toBe(mine);
  });

  it('azure uses the HCL attestation key and never creates one', async () => {
    const container = await createNodeContainer({
      csp: 'azure',
      variant: 'azure-trustedlaunch',
      diskDevice: '/dev/null',
      logLevel: 'silent',
    });
    const tpm = await container.getAsync<Tpm2ToolsTpm>(Tpm);
    expect(tpm.akHandle).toBe(AZURE_HCL_AK_HANDLE);
  });

  it('the cloud registry gives each cloud its own SDK list', () => {
    const sdks = CSPS.map((csp) => CLOUDS[csp]?.sdkPackages);
    expect(sdks).toEqual([
      ['@google-cloud/compute'],
      ['@azure/arm-compute', '@azure/arm-network'],
      [
        '@aws-sdk/client-ec2',
        '@aws-sdk/client-resource-groups-tagging-api',
        '@aws-sdk/client-elastic-load-balancing-v2',
      ],
      [],
      [],
    ]);
  });
});

describe('the provider table', () => {
  it('lists every cloud once with the variants its nodes issue, the default first', () => {
    expect(CSPS).toEqual(['gcp', 'azure', 'aws', 'qemu', 'openstack']);
    expect(VARIANTS_BY_CSP).toEqual({
      gcp: ['gcp-sev-es', 'gcp-sev-snp'],
      azure: ['azure-trustedlaunch', 'azure-sev-snp', 'azure-tdx'],
      aws: ['aws-nitro-tpm', 'aws-sev-snp'],
      qemu: ['qemu-vtpm', 'qemu-tdx'],
      openstack: ['qemu-vtpm'],
    });
    for (const csp of CSPS) expect(cloudVariants(csp)).toEqual(ISSUER_VARIANTS_BY_CSP[csp]);
  });

  it('refuses a variant of another cloud, naming what the cloud issues', () => {
    expect(() => nodeConfig({ csp: 'gcp', variant: 'azure-tdx', diskDevice: '/dev/null' })).toThrow(
      'attestation variant azure-tdx is not available on gcp (want one of gcp-sev-es, gcp-sev-snp)',
    );
  });
});

describe('the OpenStack provider (one registration line; FAKE OpenStack on loopback)', () => {
  async function fakeOpenStack(): Promise<FakeOpenStack> {
    const fake = await startFakeOpenStack();
    cleanups.push(() => fake.server.close());
    fake.state.servers = [
      {
        id: '11111111-2222-3333-4444-555555555555',
        name: 'control-plane-0',
        status: 'ACTIVE',
        metadata: { 'constellation-uid': 'uid-1', 'constellation-role': 'ControlPlane' },
        networks: { 'confboot-net': ['10.0.0.5'] },
      },
    ];
    fake.state.selfId = '11111111-2222-3333-4444-555555555555';
    return fake;
  }

  it('reaches the metadata service and Nova with the node config: metadata URL, compute endpoint, token file', async () => {
    const fake = await fakeOpenStack();
    const tokenFile = join(tmp(), 'token');
    writeFileSync(tokenFile, `${OPENSTACK_FAKE_TOKEN}\n`);
    const container = await createNodeContainer({
      csp: 'openstack',
      variant: 'qemu-vtpm',
      diskDevice: '/dev/null',
      logLevel: 'silent',
      metadata: { baseUrl: fake.server.url, apiEndpoint: fake.computeEndpoint, authTokenFile: tokenFile },
    });
    expect(await checkWiring(container)).toHaveLength(NODE_TOKENS.length);
    const metadata = await container.getAsync<MetadataAPI>(MetadataAPI);
    const self = await metadata.self();
    expect(self).toMatchObject({ name: 'control-plane-0', vpcIp: '10.0.0.5' });
    expect(await metadata.uid()).toBe('uid-1');
    const issuer = await container.getAsync<Issuer>(Issuer);
    expect(issuer.variant).toBe('qemu-vtpm');
  });

  it('a missing compute endpoint or token is named by the first metadata call, and the next call retries', async () => {
    const fake = await fakeOpenStack();
    const noEndpoint = await createNodeContainer({
      csp: 'openstack',
      variant: 'qemu-vtpm',
      diskDevice: '/dev/null',
      logLevel: 'silent',
      metadata: { baseUrl: fake.server.url },
    });
    const err = await (await noEndpoint.getAsync<MetadataAPI>(MetadataAPI)).self().catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect(String(err)).toMatch(/setting up the openstack metadata API: .*no cloud API endpoint configured/);

    const tokenFile = join(tmp(), 'missing-token');
    const settings = providerSettings(
      nodeConfig({
        csp: 'openstack',
        variant: 'qemu-vtpm',
        diskDevice: '/d',
        metadata: { apiEndpoint: fake.computeEndpoint, authTokenFile: tokenFile },
      }),
      silentLogger,
    );
    await expect(settings.authToken()).rejects.toThrow(`reading the cloud API token from ${tokenFile}`);
    writeFileSync(tokenFile, '  \n');
    await expect(settings.authToken()).rejects.toThrow(/is empty/);
    writeFileSync(tokenFile, 'tok\n');
    expect(await settings.authToken()).toBe('tok');
    expect(settings.apiEndpoint()).toBe(fake.computeEndpoint);
    expect(DEFAULT_CLOUD_API_TOKEN_PATH).toBe('/run/confboot/cloud-api-token');
  });
});

describe('the dummy variant cannot be selected', () => {
  it('no cloud offers it', () => {
    for (const csp of CSPS) expect(VARIANTS_BY_CSP[csp]).not.toContain('dummy');
    expect(PRODUCTION_VARIANTS).not.toContain('dummy');
  });

  it.each(CSPS)('on %s, node config and container refuse it', async (csp) => {
    const input = { csp, variant: 'dummy', diskDevice: '/dev/null' };
    expect(() => nodeConfig(input)).toThrow(/"dummy" cannot be used by a node/);
    await expect(createNodeContainer(input)).rejects.toThrow(/cannot be used by a node/);
  });

  it('nor can a variant of another cloud, an unknown variant or an unknown cloud', () => {
    expect(() => nodeConfig({ csp: 'qemu', variant: 'gcp-sev-es', diskDevice: '/d' })).toThrow(
      /gcp-sev-es is not available on qemu/,
    );
    expect(() => nodeConfig({ csp: 'aws', variant: 'nope', diskDevice: '/d' })).toThrow(
      /"nope" cannot be used/,
    );
    expect(() => nodeConfig({ csp: 'mars', variant: 'qemu-vtpm', diskDevice: '/d' })).toThrow(
      /unknown cloud "mars" \(want one of gcp, azure, aws, qemu, openstack\)/,
    );
    expect(VARIANT_NAMES).toContain('dummy'); // it exists, for tests only
  });
});

describe('SEV-SNP and TDX nodes get the issuer of their cloud and variant', () => {
  it.each([
    ['aws', 'aws-sev-snp'],
    ['gcp', 'gcp-sev-snp'],
    ['azure', 'azure-sev-snp'],
    ['azure', 'azure-tdx'],
  ] as const)(
    '%s with %s binds an Issuer of that variant (wiring only; no SNP/TDX hardware here)',
    async (csp, variant) => {
      const container = await createNodeContainer({ csp, variant, diskDevice: '/dev/null' });
      const issuer = await container.getAsync<Issuer>(Issuer);
      expect(issuer.variant).toBe(variant);
      expect(issuer.oid).toBe(variantOid(variant));
    },
  );
});
