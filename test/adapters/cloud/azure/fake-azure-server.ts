/**
 * A fake Azure for tests (Azure cannot exist here): IMDS (instance document and managed-identity
 * token) and the ARM REST paths @azure/arm-compute and @azure/arm-network call, on one loopback
 * port. It checks `Metadata: true` on IMDS, an `api-version` and the IMDS-issued bearer token on
 * ARM, and pages VM lists through `nextLink`; anything unexpected is answered 400.
 */
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../shared/fake-http.js';

/** The token the fake IMDS issues and the fake ARM accepts. */
export const AZURE_FAKE_TOKEN = 'eyJ.fake-azure-token';

export interface FakeAzureVm {
  scaleSet: string;
  instanceId: string;
  computerName: string;
  tags?: Record<string, string>;
  privateIp: string;
}

export interface FakeAzureState {
  subscriptionId: string;
  resourceGroup: string;
  self: { scaleSet: string; instanceId: string };
  imdsTags: Record<string, string>;
  scaleSets: { name: string; tags: Record<string, string> }[];
  vms: FakeAzureVm[];
  loadBalancers: { name: string; tags: Record<string, string>; privateIp?: string; publicIpName?: string }[];
  publicIps: { name: string; ip: string }[];
  pageSize: number;
}

export interface FakeAzure {
  server: FakeHttpServer;
  state: FakeAzureState;
  /** Paths (lower-cased, no query) of ARM requests, in order. */
  armPaths(): string[];
}

/** The VM's immutable vmId (a UUID) the fake reports: one per scale set and instance. */
export function fakeAzureVmUuid(vm: { scaleSet: string; instanceId: string }): string {
  const hex = Buffer.from(`${vm.scaleSet}/${vm.instanceId}`).toString('hex').padEnd(32, '0').slice(0, 32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function vmId(s: FakeAzureState, vm: { scaleSet: string; instanceId: string }): string {
  return `/subscriptions/${s.subscriptionId}/resourceGroups/${s.resourceGroup}/providers/Microsoft.Compute/virtualMachineScaleSets/${vm.scaleSet}/virtualMachines/${vm.instanceId}`;
}

function vmJson(s: FakeAzureState, vm: FakeAzureVm) {
  return {
    id: vmId(s, vm),
    name: `${vm.scaleSet}_${vm.instanceId}`,
    instanceId: vm.instanceId,
    ...(vm.tags ? { tags: vm.tags } : {}),
    properties: { vmId: fakeAzureVmUuid(vm), osProfile: { computerName: vm.computerName } },
  };
}

function nicJson(s: FakeAzureState, vm: FakeAzureVm) {
  const id = vmId(s, vm);
  return {
    id: `${id}/networkInterfaces/nic`,
    name: 'nic',
    properties: {
      primary: true,
      virtualMachine: { id },
      ipConfigurations: [
        { name: 'secondary', properties: { primary: false, privateIPAddress: '192.0.2.1' } },
        { name: 'ipconfig', properties: { primary: true, privateIPAddress: vm.privateIp } },
      ],
    },
  };
}

/** Starts the fake. Mutate `state` to change the world. */
export async function startFakeAzure(): Promise<FakeAzure> {
  const state: FakeAzureState = {
    subscriptionId: '00000000-1111-2222-3333-444444444444',
    resourceGroup: 'confboot-rg',
    self: { scaleSet: '', instanceId: '' },
    imdsTags: {},
    scaleSets: [],
    vms: [],
    loadBalancers: [],
    publicIps: [],
    pageSize: 2,
  };
  let base = '';
  const handler = (req: RecordedRequest): FakeReply => {
    const url = new URL(req.url, base);
    if (req.method !== 'GET') throw new UnexpectedRequest('only GET is expected');
    if (url.pathname.startsWith('/metadata/')) {
      if (req.headers.metadata !== 'true') throw new UnexpectedRequest('IMDS needs Metadata: true');
      if (url.pathname === '/metadata/instance') {
        if (url.searchParams.get('api-version') !== '2021-02-01' || url.searchParams.get('format') !== 'json')
          throw new UnexpectedRequest('unexpected IMDS query');
        const self = state.vms.find(
          (v) => v.scaleSet === state.self.scaleSet && v.instanceId === state.self.instanceId,
        );
        return {
          body: {
            compute: {
              resourceId: vmId(state, state.self),
              subscriptionId: state.subscriptionId,
              resourceGroupName: state.resourceGroup,
              vmScaleSetName: state.self.scaleSet,
              osProfile: { computerName: self?.computerName ?? '' },
              tagsList: Object.entries(state.imdsTags).map(([name, value]) => ({ name, value })),
            },
          },
        };
      }
      if (url.pathname === '/metadata/identity/oauth2/token') {
        if (url.searchParams.get('resource') !== 'https://management.azure.com')
          throw new UnexpectedRequest('unexpected token resource');
        return {
          body: { access_token: AZURE_FAKE_TOKEN, expires_on: String(Math.floor(Date.now() / 1000) + 3600) },
        };
      }
      throw new UnexpectedRequest('unknown IMDS path');
    }
    if (!url.searchParams.get('api-version')) throw new UnexpectedRequest('ARM call without api-version');
    if (req.headers.authorization !== `Bearer ${AZURE_FAKE_TOKEN}`)
      throw new UnexpectedRequest('bad bearer token');
    const prefix =
      `/subscriptions/${state.subscriptionId}/resourcegroups/${state.resourceGroup}/providers/`.toLowerCase();
    const lower = url.pathname.toLowerCase();
    if (!lower.startsWith(prefix)) throw new UnexpectedRequest('unknown ARM scope');
    // ARM paths are case-insensitive (the network SDK even sends `microsoft.Compute`).
    const rest = url.pathname.slice(prefix.length).split('/');
    const key = rest.map((p, i) => (i === 0 || i % 2 === 1 ? p.toLowerCase() : '*')).join('/');
    const pageOf = <T>(items: T[]) => {
      const start = Number(url.searchParams.get('$skiptoken') ?? '0');
      const next = start + state.pageSize;
      const nextUrl = new URL(url.toString());
      nextUrl.searchParams.set('$skiptoken', String(next));
      return {
        body: {
          value: items.slice(start, next),
          ...(next < items.length ? { nextLink: nextUrl.toString() } : {}),
        },
      };
    };
    const vmsOf = (set: string) => state.vms.filter((v) => v.scaleSet.toLowerCase() === set.toLowerCase());
    switch (key) {
      case 'microsoft.compute/virtualmachinescalesets':
        return pageOf(state.scaleSets.map((s) => ({ id: `${prefix}${s.name}`, name: s.name, tags: s.tags })));
      case 'microsoft.compute/virtualmachinescalesets/*/virtualmachines':
        return pageOf(vmsOf(rest[2] as string).map((v) => vmJson(state, v)));
      case 'microsoft.compute/virtualmachinescalesets/*/virtualmachines/*': {
        const vm = vmsOf(rest[2] as string).find((v) => v.instanceId === rest[4]);
        if (!vm) return { status: 404, body: { error: { code: 'NotFound', message: 'no such VM' } } };
        return { body: vmJson(state, vm) };
      }
      case 'microsoft.compute/virtualmachinescalesets/*/virtualmachines/*/networkinterfaces':
        return pageOf(
          vmsOf(rest[2] as string)
            .filter((v) => v.instanceId === rest[4])
            .map((v) => nicJson(state, v)),
        );
      case 'microsoft.compute/virtualmachinescalesets/*/networkinterfaces':
        return pageOf(vmsOf(rest[2] as string).map((v) => nicJson(state, v)));
      case 'microsoft.network/loadbalancers':
        return pageOf(
          state.loadBalancers.map((lb) => ({
            id: `${prefix}microsoft.network/loadbalancers/${lb.name}`,
            name: lb.name,
            tags: lb.tags,
            properties: {
              frontendIPConfigurations: [
                {
                  name: 'frontend',
                  properties: {
                    ...(lb.privateIp ? { privateIPAddress: lb.privateIp } : {}),
                    ...(lb.publicIpName
                      ? {
                          publicIPAddress: {
                            id: `/subscriptions/${state.subscriptionId}/resourceGroups/${state.resourceGroup}/providers/Microsoft.Network/publicIPAddresses/${lb.publicIpName}`,
                          },
                        }
                      : {}),
                  },
                },
              ],
            },
          })),
        );
      case 'microsoft.network/publicipaddresses/*': {
        const ip = state.publicIps.find((p) => p.name === rest[2]);
        if (!ip) return { status: 404, body: { error: { code: 'NotFound', message: 'no such public IP' } } };
        return { body: { id: url.pathname, name: ip.name, properties: { ipAddress: ip.ip } } };
      }
      default:
        throw new UnexpectedRequest(`unknown ARM path ${key}`);
    }
  };
  const server = await startFakeHttpServer(handler, {
    status: 503,
    body: { error: { code: 'ServerBusy', message: 'injected transient failure' } },
  });
  base = server.url;
  return {
    server,
    state,
    armPaths: () =>
      server.requests
        .map((r) => r.url.split('?')[0]!.toLowerCase())
        .filter((p) => p.startsWith('/subscriptions/')),
  };
}
