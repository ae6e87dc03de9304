/**
 * The check a joining node makes of a join ticket before it takes the node lock: every field it
 * needs is present, and a control plane's files are exactly the expected names, each once.
 */
import { ConfbootError } from '../ports/errors.js';
import { CONTROL_PLANE_FILE_NAMES } from '../ports/kubernetes-node.js';
import type { JoinTicket } from '../ports/types.js';

/**
 * Checks a join ticket before the node lock is taken, so a malformed ticket costs one retry instead
 * of the node. Throws `invalid-argument` naming the field (never its value).
 */
export function checkJoinTicket(ticket: JoinTicket, isControlPlane: boolean): void {
  const missing = (field: string) =>
    new ConfbootError('invalid-argument', `checking join ticket: ${field} is empty`, { recoverable: true });
  if (ticket.stateDiskKey.length === 0) throw missing('state disk key');
  if (ticket.measurementSecret.length === 0) throw missing('measurement secret');
  if (ticket.measurementSalt.length === 0) throw missing('measurement salt');
  if (ticket.kubeletCert.length === 0) throw missing('kubelet certificate');
  if (ticket.apiServerEndpoint === '') throw missing('API server endpoint');
  if (ticket.token === '') throw missing('bootstrap token');
  if (ticket.discoveryTokenCaCertHash === '') throw missing('discovery token CA cert hash');
  if (!isControlPlane) return;
  const seen = new Set<string>();
  for (const file of ticket.controlPlaneFiles) {
    if (!CONTROL_PLANE_FILE_NAMES.includes(file.name)) {
      throw new ConfbootError(
        'invalid-argument',
        `checking join ticket: unexpected control-plane file name ${JSON.stringify(file.name)}`,
        { recoverable: true },
      );
    }
    if (seen.has(file.name)) {
      throw new ConfbootError(
        'invalid-argument',
        `checking join ticket: control-plane file ${JSON.stringify(file.name)} appears twice`,
        { recoverable: true },
      );
    }
    seen.add(file.name);
  }
}
