/**
 * The join service's deny list (application layer): the watched deny-list file when one is given
 * (a missing or invalid file fails the start; a bad reload keeps the last good list), or nobody
 * denied. Its entry counts and reloads are in the metrics.
 */
import { FileDenyList } from '../../adapters/fs/file-deny-list.js';
import type { JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { type DenyList, EMPTY_DENY_LIST } from '../../ports/deny-list.js';
import type { Logger } from '../../ports/logger.js';
import type { Cleanups } from './lifecycle.js';

/** The deny list (watched file, or nobody), with its sizes in the metrics. */
export async function loadDenyList({
  denyListPath,
  logger,
  metrics,
  cleanups,
}: {
  denyListPath: string | undefined;
  logger: Logger;
  metrics: JoinServiceMetrics;
  cleanups: Pick<Cleanups, 'push'>;
}): Promise<DenyList> {
  let denyList: DenyList = EMPTY_DENY_LIST;
  if (denyListPath !== undefined) {
    const file = await FileDenyList.start({
      path: denyListPath,
      logger,
      onReload: (o) => {
        metrics.configReloads.inc({ config: 'deny-list', result: o.ok ? 'ok' : 'error' });
        if (o.ok) {
          metrics.denyListEntries.set({ kind: 'node' }, o.nodes);
          metrics.denyListEntries.set({ kind: 'disk-uuid' }, o.diskUuids);
        }
      },
    });
    cleanups.push(() => file.close());
    denyList = file;
  }
  metrics.denyListEntries.set({ kind: 'node' }, denyList.size.nodes);
  metrics.denyListEntries.set({ kind: 'disk-uuid' }, denyList.size.diskUuids);
  return denyList;
}
