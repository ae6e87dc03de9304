/**
 * Join service: an attestation config must enforce something. A config whose measurements are all
 * `warnOnly` accepts a node whatever it booted (mismatches are only logged), which is as open as an
 * empty config (refused by the measurements parser). Such a config is refused at start and on
 * reload unless the operator opts in explicitly (`--allow-unenforced-measurements`); with the
 * opt-in every config that enforces nothing is logged at error level each time it is loaded.
 */
import { parseAttestationConfig } from '../../domain/measurements.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';

/** The CLI flag that lets a config without an enforced measurement through. */
export const ALLOW_UNENFORCED_FLAG = '--allow-unenforced-measurements';

/**
 * Checks that the attestation config (JSON bytes) enforces at least one measurement. Configs the
 * parser refuses are left to the validator builder, which reports them precisely.
 * @throws ConfbootError `invalid-argument` when every measurement is warnOnly and `allowUnenforced`
 *   is false
 */
export function checkEnforcesMeasurements(
  config: Uint8Array,
  allowUnenforced: boolean,
  logger: Logger,
): void {
  let measurements: ReturnType<typeof parseAttestationConfig>['measurements'];
  try {
    measurements = parseAttestationConfig(Buffer.from(config).toString('utf8')).measurements;
  } catch {
    return;
  }
  const enforced = [...measurements.values()].filter((m) => !m.warnOnly).length;
  if (enforced > 0) return;
  const what = `the attestation config enforces no measurement (all ${measurements.size} are warnOnly), so any attested node would be accepted whatever it booted`;
  if (!allowUnenforced)
    throw new ConfbootError(
      'invalid-argument',
      `${what}; refusing it (enforce at least one measurement, or pass ${ALLOW_UNENFORCED_FLAG} to accept this knowingly)`,
    );
  logger.error(`SECURITY: ${what}; accepted because ${ALLOW_UNENFORCED_FLAG} is set`, {
    measurements: measurements.size,
    enforced: 0,
  });
}
