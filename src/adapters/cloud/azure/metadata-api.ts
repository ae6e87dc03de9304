/**
 * MetadataAPI for Azure (docs/upstream.md): the instance document from IMDS, scale-set VMs from
 * @azure/arm-compute, NICs, load balancers and public IPs from @azure/arm-network. Both SDKs load
 * lazily on first use. Differs from upstream in one place: a VM without a role tag is `Unknown`
 * instead of a crash.
 */
import type * as ArmCompute from '@azure/arm-compute';
import type * as ArmNetwork from '@azure/arm-network';
import { ConfbootError } from '../../../ports/errors.js';
import type { MetadataAPI } from '../../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../../ports/types.js';
import type { CommonCloudOptions, DeadlineSettings } from '../../http/call.js';
import { importOptionalPeer } from '../../system/optional-peer.js';
import { deadlineSettings, LazySdk } from '../shared/sdk-calls.js';
import { parseRole, resolveTagKeys, type TagKeys } from '../shared/tags.js';
import {
  type AzureAccessToken,
  DEFAULT_AZURE_IMDS_URL,
  fetchImdsCompute,
  type ImdsCompute,
  ImdsManagedIdentityCredential,
} from './imds.js';

/** Azure Resource Manager. */
export const DEFAULT_ARM_ENDPOINT = 'https://management.azure.com';

/** A TokenCredential (`@azure/core-auth`), e.g. from @azure/identity. */
export interface AzureTokenCredential {
  getToken(scopes: string | string[], options?: object): Promise<AzureAccessToken | null>;
}

/** Options of {@link AzureMetadataAPI}. */
export interface AzureMetadataAPIOptions extends CommonCloudOptions {
  /** IMDS root; default `http://169.254.169.254`. */
  imdsBaseUrl?: string;
  /**
   * ARM endpoint; default `https://management.azure.com`. An `http://` endpoint (local fakes only)
   * turns on `allowInsecureConnection` and sends the bearer token over plain HTTP.
   */
  armEndpoint?: string;
  /** Credential for ARM; default the VM's managed identity through IMDS. */
  credential?: AzureTokenCredential;
  /** SDK-level retries; default 0 (callers retry with backoff). */
  maxRetries?: number;
  tagKeys?: Partial<TagKeys>;
  /** How long the IMDS document is cached; default 12 h (as upstream). */
  imdsCacheTtlInMs?: number;
}

interface Clients {
  compute: ArmCompute.ComputeManagementClient;
  network: ArmNetwork.NetworkManagementClient;
}

type NetworkInterface = ArmNetwork.NetworkInterface;

/** `/subscriptions/…/resourceGroups/RG/…/virtualMachineScaleSets/S/virtualMachines/I` → parts. */
export function parseScaleSetVmId(resourceId: string): {
  resourceGroup: string;
  scaleSet: string;
  instanceId: string;
} {
  const m =
    /\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/virtualMachineScaleSets\/([^/]+)\/virtualMachines\/([^/]+)$/i.exec(
      resourceId,
    );
  if (!m)
    throw new ConfbootError('internal', `not a scale set VM resource ID: ${JSON.stringify(resourceId)}`);
  return { resourceGroup: m[1] as string, scaleSet: m[2] as string, instanceId: m[3] as string };
}

/** Private IP of the primary IP configuration of the primary NIC (else the first of each). */
function primaryPrivateIp(nics: NetworkInterface[]): string {
  const nic = nics.find((n) => n.primary) ?? nics[0];
  const configs = nic?.ipConfigurations ?? [];
  const config = configs.find((c) => c.primary) ?? configs[0];
  return config?.privateIPAddress ?? '';
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** MetadataAPI on Azure scale sets. */
export class AzureMetadataAPI implements MetadataAPI {
  private readonly imdsBaseUrl: string;
  private readonly armEndpoint: string;
  private readonly credential: AzureTokenCredential;
  private readonly keys: TagKeys;
  private readonly deadline: DeadlineSettings;
  private readonly imdsTtl: number;
  private imdsCache: { doc: ImdsCompute; at: number } | undefined;
  private clients: Promise<Clients> | undefined;
  /** The provider's SDK, imported on first use. */
  private readonly sdk = new LazySdk(() =>
    importOptionalPeer(() => Promise.all([import('@azure/arm-compute'), import('@azure/arm-network')])),
  );

  constructor(private readonly options: AzureMetadataAPIOptions = {}) {
    this.imdsBaseUrl = (options.imdsBaseUrl ?? DEFAULT_AZURE_IMDS_URL).replace(/\/+$/, '');
    this.armEndpoint = (options.armEndpoint ?? DEFAULT_ARM_ENDPOINT).replace(/\/+$/, '');
    this.credential = options.credential ?? new ImdsManagedIdentityCredential(this.imdsBaseUrl);
    this.keys = resolveTagKeys(options.tagKeys);
    this.imdsTtl = options.imdsCacheTtlInMs ?? 12 * 3600_000;
    this.deadline = deadlineSettings(options);
  }

  private async imds(signal: AbortSignal): Promise<ImdsCompute> {
    if (this.imdsCache && Date.now() - this.imdsCache.at < this.imdsTtl) return this.imdsCache.doc;
    const doc = await fetchImdsCompute(this.imdsBaseUrl, signal);
    this.imdsCache = { doc, at: Date.now() };
    return doc;
  }

  private tag(doc: ImdsCompute, key: string): string {
    return doc.tagsList.find((t) => t.name === key)?.value ?? '';
  }

  private getClients(subscriptionId: string): Promise<Clients> {
    this.clients ??= importOptionalPeer(() =>
      Promise.all([import('@azure/arm-compute'), import('@azure/arm-network')]),
    ).then(
      ([compute, network]) => {
        const insecure = this.armEndpoint.startsWith('http://');
        const opts = {
          endpoint: this.armEndpoint,
          retryOptions: { maxRetries: this.options.maxRetries ?? 0 },
          ...(insecure ? { allowInsecureConnection: true } : {}),
        };
        const credential = this.credential as ConstructorParameters<
          typeof compute.ComputeManagementClient
        >[0];
        const clients = {
          compute: new compute.ComputeManagementClient(credential, subscriptionId, opts),
          network: new network.NetworkManagementClient(credential, subscriptionId, opts),
        };
        if (insecure) {
          // The SDK's bearer policy refuses plain HTTP; for a local endpoint add the token ourselves.
          const scope = `${DEFAULT_ARM_ENDPOINT}/.default`;
          for (const c of [clients.compute, clients.network]) {
            c.pipeline.removePolicy({ name: 'bearerTokenAuthenticationPolicy' });
            c.pipeline.addPolicy(
              {
                name: 'confbootPlainHttpBearerPolicy',
                sendRequest: async (request, next) => {
                  const token = await this.credential.getToken(scope, { abortSignal: request.abortSignal });
                  if (token === null)
                    throw new ConfbootError('permission-denied', 'credential returned no token');
                  request.headers.set('authorization', `Bearer ${token.token}`);
                  return next(request);
                },
              },
              { phase: 'Sign' },
            );
          }
        }
        return clients;
      },
      (err: unknown) => {
        this.clients = undefined;
        throw err;
      },
    );
    return this.clients;
  }

  private async context(signal: AbortSignal) {
    const doc = await this.imds(signal);
    const clients = await this.getClients(doc.subscriptionId);
    return { doc, ...clients, rg: doc.resourceGroupName };
  }

  /** This scale set VM: name = computer name, role = VM tag, VPC IP = primary private IP. */
  self(options?: CallOptions): Promise<InstanceMetadata> {
    return this.sdk.call('getting own instance from Azure', this.deadline, options, async (abortSignal) => {
      const { doc, compute, network } = await this.context(abortSignal);
      const { resourceGroup, scaleSet, instanceId } = parseScaleSetVmId(doc.resourceId);
      const [vm, nics] = await Promise.all([
        compute.virtualMachineScaleSetVMs.get(resourceGroup, scaleSet, instanceId, { abortSignal }),
        collect(
          network.networkInterfaces.listVirtualMachineScaleSetVMNetworkInterfaces(
            resourceGroup,
            scaleSet,
            instanceId,
            {
              abortSignal,
            },
          ),
        ),
      ]);
      return {
        name: vm.osProfile?.computerName ?? doc.computerName,
        providerId: `azure://${doc.resourceId}`,
        ...(vm.vmId ? { instanceId: vm.vmId } : {}),
        // upstream dereferenced a missing role tag; a missing tag is simply Unknown here
        role: parseRole(vm.tags?.[this.keys.role]),
        vpcIp: primaryPrivateIp(nics),
      };
    });
  }

  /** The VMs of every scale set in the resource group tagged with this cluster's UID. */
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return this.sdk.call('listing instances on Azure', this.deadline, options, async (abortSignal) => {
      const { doc, compute, network, rg } = await this.context(abortSignal);
      const uid = this.tag(doc, this.keys.uid);
      if (uid === '') throw new ConfbootError('failed-precondition', `own VM has no tag ${this.keys.uid}`);
      const scaleSets = (await collect(compute.virtualMachineScaleSets.list(rg, { abortSignal }))).filter(
        (s) => s.tags?.[this.keys.uid] === uid && s.name,
      );
      const perSet = await Promise.all(
        scaleSets.map(async (s) => {
          const name = s.name as string;
          const [vms, nics] = await Promise.all([
            collect(compute.virtualMachineScaleSetVMs.list(rg, name, { abortSignal })),
            collect(
              network.networkInterfaces.listVirtualMachineScaleSetNetworkInterfaces(rg, name, {
                abortSignal,
              }),
            ),
          ]);
          const nicsByVm = new Map<string, NetworkInterface[]>();
          for (const nic of nics) {
            const vmId = nic.virtualMachine?.id?.toLowerCase();
            if (vmId) nicsByVm.set(vmId, [...(nicsByVm.get(vmId) ?? []), nic]);
          }
          return vms.map(
            (vm): InstanceMetadata => ({
              name: vm.osProfile?.computerName ?? '',
              providerId: `azure://${vm.id ?? ''}`,
              ...(vm.vmId ? { instanceId: vm.vmId } : {}),
              role: parseRole(vm.tags?.[this.keys.role]),
              vpcIp: primaryPrivateIp(nicsByVm.get((vm.id ?? '').toLowerCase()) ?? []),
            }),
          );
        }),
      );
      return perSet.flat();
    });
  }

  /** First load balancer tagged with the UID: its public IP if it has one, else its private frontend IP. */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return this.sdk.call(
      'getting load balancer endpoint from Azure',
      this.deadline,
      options,
      async (abortSignal) => {
        const { doc, network, rg } = await this.context(abortSignal);
        const uid = this.tag(doc, this.keys.uid);
        const lbs = await collect(network.loadBalancers.list(rg, { abortSignal }));
        const lb = lbs.find((l) => uid !== '' && l.tags?.[this.keys.uid] === uid);
        if (lb === undefined)
          throw new ConfbootError('failed-precondition', `no load balancer tagged ${this.keys.uid}=${uid}`);
        const frontend = lb.frontendIPConfigurations?.[0];
        const publicIpId = frontend?.publicIPAddress?.id;
        if (publicIpId) {
          const m = /\/resourceGroups\/([^/]+)\/.*\/publicIPAddresses\/([^/]+)$/i.exec(publicIpId);
          if (!m) throw new ConfbootError('internal', `not a public IP resource ID: ${publicIpId}`);
          const ip = await network.publicIPAddresses.get(m[1] as string, m[2] as string, { abortSignal });
          if (ip.ipAddress) return { host: ip.ipAddress, port: '6443' };
        }
        const host = frontend?.privateIPAddress;
        if (!host)
          throw new ConfbootError('failed-precondition', `load balancer ${lb.name ?? ''} has no frontend IP`);
        return { host, port: '6443' };
      },
    );
  }

  /** IMDS tag `constellation-init-secret-hash`; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return this.sdk.call('getting init secret hash from Azure', this.deadline, options, async (signal) => {
      return new TextEncoder().encode(this.tag(await this.imds(signal), this.keys.initSecretHash));
    });
  }

  /** IMDS tag `constellation-uid`. */
  uid(options?: CallOptions): Promise<string> {
    return this.sdk.call('getting cluster UID from Azure', this.deadline, options, async (signal) => {
      return this.tag(await this.imds(signal), this.keys.uid);
    });
  }
}
