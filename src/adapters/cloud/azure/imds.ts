/**
 * Azure Instance Metadata Service (IMDS) on the link-local address: the instance document the Azure
 * MetadataAPI reads and a managed-identity token credential for the ARM SDK clients,
 * so a node needs no @azure/identity. Plain HTTP with `Metadata: true`, never through a proxy.
 */
import { ConfbootError } from '../../../ports/errors.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';

/** IMDS address. */
export const DEFAULT_AZURE_IMDS_URL = 'http://169.254.169.254';

/** IMDS API version upstream uses for the instance document. */
export const IMDS_API_VERSION = '2021-02-01';

/** The fields of the IMDS instance document confboot uses. */
export interface ImdsCompute {
  resourceId: string;
  subscriptionId: string;
  resourceGroupName: string;
  tagsList: { name: string; value: string }[];
  computerName: string;
}

/** GET /metadata/instance and pick out what confboot uses. */
export async function fetchImdsCompute(baseUrl: string, signal: AbortSignal): Promise<ImdsCompute> {
  const what = 'Azure IMDS /metadata/instance';
  const res = expectOk(
    await httpRequest({
      url: `${baseUrl}/metadata/instance?format=json&api-version=${IMDS_API_VERSION}`,
      headers: { Metadata: 'true' },
      signal,
    }),
    what,
  );
  const doc = parseJsonBody(res, what) as { compute?: Record<string, unknown> };
  const c = doc.compute;
  if (typeof c !== 'object' || c === null) throw new ConfbootError('internal', `${what}: no compute section`);
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const tags = Array.isArray(c.tagsList) ? (c.tagsList as unknown[]) : [];
  const out: ImdsCompute = {
    resourceId: str(c.resourceId),
    subscriptionId: str(c.subscriptionId),
    resourceGroupName: str(c.resourceGroupName),
    tagsList: tags
      .filter((t): t is { name: string; value: string } => typeof t === 'object' && t !== null)
      .map((t) => ({ name: str(t.name), value: str(t.value) })),
    computerName: str((c.osProfile as Record<string, unknown> | undefined)?.computerName),
  };
  if (!out.resourceId || !out.subscriptionId || !out.resourceGroupName)
    throw new ConfbootError(
      'unavailable',
      `${what}: resourceId, subscriptionId or resourceGroupName is empty`,
    );
  return out;
}

/** An access token as the Azure SDKs expect it. */
export interface AzureAccessToken {
  token: string;
  expiresOnTimestamp: number;
}

/**
 * A TokenCredential for the ARM clients from the VM's managed identity via IMDS
 * (`/metadata/identity/oauth2/token`). Tokens are cached until five minutes before they expire.
 */
export class ImdsManagedIdentityCredential {
  private cache = new Map<string, AzureAccessToken>();

  constructor(
    private readonly baseUrl: string = DEFAULT_AZURE_IMDS_URL,
    private readonly clientId?: string,
  ) {}

  /** Returns a token for `scopes` (one resource, e.g. `https://management.azure.com/.default`). */
  async getToken(
    scopes: string | string[],
    options?: { abortSignal?: AbortSignal | { aborted: boolean } },
  ): Promise<AzureAccessToken> {
    const scope = Array.isArray(scopes) ? (scopes[0] ?? '') : scopes;
    const resource = scope.replace(/\/\.default$/, '');
    const cached = this.cache.get(resource);
    if (cached && cached.expiresOnTimestamp - 5 * 60_000 > Date.now()) return cached;
    const what = 'Azure IMDS managed identity token';
    const q = new URLSearchParams({ 'api-version': '2018-02-01', resource });
    if (this.clientId) q.set('client_id', this.clientId);
    const signal =
      options?.abortSignal instanceof AbortSignal ? options.abortSignal : AbortSignal.timeout(10_000);
    const res = expectOk(
      await httpRequest({
        url: `${this.baseUrl}/metadata/identity/oauth2/token?${q}`,
        headers: { Metadata: 'true' },
        signal,
      }),
      what,
    );
    const body = parseJsonBody(res, what) as { access_token?: unknown; expires_on?: unknown };
    if (typeof body.access_token !== 'string' || body.access_token === '')
      throw new ConfbootError('internal', `${what}: no access_token`);
    const expiresOn = Number(body.expires_on);
    const token = {
      token: body.access_token,
      expiresOnTimestamp: Number.isFinite(expiresOn) ? expiresOn * 1000 : Date.now() + 5 * 60_000,
    };
    this.cache.set(resource, token);
    return token;
  }
}
