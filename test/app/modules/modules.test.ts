/**
 * The node containers: for every cloud and each of its variants, the common module plus the cloud
 * module resolve every token (no hardware touched: adapters connect lazily), singletons are shared,
 * and the test-only `dummy` variant cannot be selected.
 */
import { describe, expect, it } from 'vitest';
import { QemuTdxIssuer } from '../../../src/adapters/attestation/tdx/issuer.js';
import { VtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { AwsMetadataAPI } from '../../../src/adapters/cloud/aws/metadata-api.js';
import { AzureMetadataAPI } from '../../../src/adapters/cloud/azure/metadata-api.js';
import { GcpMetadataAPI } from '../../../src/adapters/cloud/gcp/metadata-api.js';
import { QemuMetadataAPI } from '../../../src/adapters/cloud/qemu/metadata-api.js';
import type { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import type { BootstrapperNodeDeps } from '../../../src/app/bootstrapper/node.js';
import {
  AZURE_HCL_AK_HANDLE,
  BootstrapperDeps,
  bootstrapperDeps,
  CSPS,
  type Csp,
  checkWiring,
  createNodeContainer,
  moduleForCsp,
  NODE_TOKENS,
  nodeConfig,
  SharedNodeLock,
  VARIANTS_BY_CSP,
} from '../../../src/app/modules/index.js';
import { NodeLock } from '../../../src/domain/node-lock.js';
import { Issuer } from '../../../src/ports/issuer.js';
import { MetadataAPI } from '../../../src/ports/metadata-api.js';
import { Random } from '../../../src/ports/random.js';
import { Tpm } from '../../../src/ports/tpm.js';
import { PRODUCTION_VARIANTS, VARIANT_OIDS } from '../../../src/ports/variant.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';

const METADATA_CLASS: Record<Csp, abstract new (...args: never[]) => unknown> = {
  gcp: GcpMetadataAPI,
  azure: AzureMetadataAPI,
  aws: AwsMetadataAPI,
  qemu: QemuMetadataAPI,
};

const cases = CSPS.flatMap((csp) => VARIANTS_BY_CSP[csp].map((variant) => ({ csp, variant })));

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
      expect(await container.getAsync(MetadataAPI)).toBeInstanceOf(METADATA_CLASS[csp]);
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

  it('moduleForCsp gives each cloud its own module with its own SDK list', async () => {
    const sdks = await Promise.all(CSPS.map(async (csp) => (await moduleForCsp(csp)).SDK_PACKAGES));
    expect(sdks).toEqual([
      ['@google-cloud/compute'],
      ['@azure/arm-compute', '@azure/arm-network'],
      [
        '@aws-sdk/client-ec2',
        '@aws-sdk/client-resource-groups-tagging-api',
        '@aws-sdk/client-elastic-load-balancing-v2',
      ],
      [],
    ]);
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
    expect(() => nodeConfig({ csp: 'openstack', variant: 'qemu-vtpm', diskDevice: '/d' })).toThrow(
      /unknown cloud "openstack"/,
    );
    expect(Object.keys(VARIANT_OIDS)).toContain('dummy'); // it exists, for tests only
  });
});
