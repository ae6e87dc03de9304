/**
 * The instance info a GCE node's vTPM attestation carries: go-tpm-tools' `GCEInstanceInfo` read from
 * the GCE metadata server (zone, project ID, instance name), rendered as Go JSON.
 */
import { wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest } from '../../http/request.js';

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
