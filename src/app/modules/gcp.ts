/**
 * The GCP node module (app layer, DI wiring): MetadataAPI on the GCE metadata server and the Compute
 * API, and the gcp-sev-es Issuer (vTPM quote, the kernel's event log, and GCE instance info read from
 * the metadata server). The Compute SDK is loaded lazily by the adapter, on first use only.
 */
import { ContainerModule } from 'inversify';
import { LINUX_EVENT_LOG_PATH, VtpmIssuer } from '../../adapters/attestation/vtpm/issuer.js';
import { DEFAULT_GCE_METADATA_URL, GcpMetadataAPI } from '../../adapters/cloud/gcp/metadata-api.js';
import { expectOk, httpRequest } from '../../adapters/cloud/shared/http.js';
import { wrapError } from '../../ports/errors.js';
import { Issuer } from '../../ports/issuer.js';
import { Logger } from '../../ports/logger.js';
import { MetadataAPI } from '../../ports/metadata-api.js';
import { Tpm } from '../../ports/tpm.js';
import type { CallOptions } from '../../ports/types.js';
import { NodeConfig } from './node-config.js';

/** npm packages of this cloud's SDK. */
export const SDK_PACKAGES: readonly string[] = Object.freeze(['@google-cloud/compute']);

/** Loads this cloud's SDK now; for the module-isolation check (`--preload-sdk`). */
export async function preloadSdk(): Promise<void> {
  await import('@google-cloud/compute');
}

/** Splits an API endpoint URL (`http://127.0.0.1:8443`) into the Compute SDK's options. */
function computeEndpoint(url: string | undefined): {
  apiEndpoint?: string;
  port?: number;
  protocol?: 'http' | 'https';
} {
  if (url === undefined) return {};
  const u = new URL(url);
  const protocol = u.protocol === 'http:' ? 'http' : 'https';
  return {
    apiEndpoint: u.hostname,
    protocol,
    ...(u.port === '' ? {} : { port: Number(u.port) }),
  };
}

/**
 * Reads go-tpm-tools' `GCEInstanceInfo` from the metadata server and renders it as Go JSON
 * (`{"zone","project_id","instance_name"}`), the bytes the gcp-sev-es validator parses.
 */
export async function gceInstanceInfo(baseUrl: string, options?: CallOptions): Promise<Uint8Array> {
  const get = async (path: string): Promise<string> => {
    const res = await httpRequest({
      url: `${baseUrl.replace(/\/+$/, '')}/${path}`,
      headers: { 'Metadata-Flavor': 'Google' },
      ...(options?.signal ? { signal: options.signal } : {}),
    });
    return expectOk(res, `GCE metadata ${path}`).body.toString('utf8').trim();
  };
  try {
    const [project, zonePath, name] = await Promise.all([
      get('project/project-id'),
      get('instance/zone'),
      get('instance/name'),
    ]);
    // The zone comes as `projects/<number>/zones/<zone>`.
    const zone = zonePath.split('/').pop() ?? '';
    return new TextEncoder().encode(JSON.stringify({ zone, project_id: project, instance_name: name }));
  } catch (err) {
    throw wrapError('reading GCE instance info', err, 'unavailable');
  }
}

/** The GCP module: binds {@link MetadataAPI} and {@link Issuer}. */
export function cloudModule(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<MetadataAPI>(MetadataAPI)
      .toResolvedValue(
        (c: NodeConfig, logger: Logger) =>
          new GcpMetadataAPI({
            ...(c.metadata.baseUrl === undefined ? {} : { metadataBaseUrl: c.metadata.baseUrl }),
            ...computeEndpoint(c.metadata.apiEndpoint),
            logger,
          }),
        [NodeConfig, Logger],
      )
      .inSingletonScope();
    bind<Issuer>(Issuer)
      .toResolvedValue(
        (c: NodeConfig, tpm: Tpm) =>
          new VtpmIssuer({
            variant: 'gcp-sev-es',
            tpm,
            instanceInfo: (_extraData, options) =>
              gceInstanceInfo(c.metadata.baseUrl ?? DEFAULT_GCE_METADATA_URL, options),
            eventLogPath: LINUX_EVENT_LOG_PATH,
          }),
        [NodeConfig, Tpm],
      )
      .inSingletonScope();
  });
}
