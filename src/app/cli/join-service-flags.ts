/**
 * Parsing of `confboot join-service`'s flags (application layer): the command table read into the
 * settings by owner, checked and typed; usage errors (exit 2) for anything malformed.
 */
import { type JoinServiceSettings, joinServiceSettings } from '../join-service/settings-by-owner.js';
import { parseOptions } from '../program/options.js';
import { joinServiceCommand } from './join-service-spec.js';

/**
 * Parses and checks `argv` (and the `CONFBOOT_*` environment). Returns undefined after printing help.
 * @throws UsageError for unknown, missing or malformed flags, an unknown cloud, or a variant that
 *   production cannot select (`dummy`)
 */
export function parseJoinServiceFlags(
  argv: string[],
  out?: NodeJS.WritableStream,
): JoinServiceSettings | undefined {
  const values = parseOptions(argv, joinServiceCommand, out);
  return values === undefined ? undefined : joinServiceSettings(values);
}
