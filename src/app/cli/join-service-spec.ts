/**
 * The command table of `confboot join-service`: its settings, one table per owner
 * (src/app/join-service/settings.ts), under one command name, summary and exit codes. The parser,
 * the `CONFBOOT_*` environment variables and --help all read it.
 */
import {
  ADMISSION_OPTIONS,
  ATTESTATION_SETTINGS,
  CLOUD_SETTINGS,
  CLUSTER_SETTINGS,
  EVIDENCE_SETTINGS,
  KEY_SERVICE_SETTINGS,
  LIMIT_SETTINGS,
  LISTEN_SETTINGS,
  RECEIPT_SETTINGS,
} from '../join-service/settings.js';
import { defineCommand } from '../program/options.js';
import { LOG_LEVEL_OPTION } from '../program/shared-options.js';

/** Flags of `confboot join-service`. */
export const joinServiceCommand = defineCommand({
  name: 'join-service',
  env: true,
  kind: 'service',
  summary:
    'Serve join and rejoin tickets to attested nodes (join.API over attested TLS), with health, metrics, audit, limits and a deny list.',
  options: {
    ...CLOUD_SETTINGS,
    ...ATTESTATION_SETTINGS,
    ...CLUSTER_SETTINGS,
    ...KEY_SERVICE_SETTINGS,
    ...RECEIPT_SETTINGS,
    ...EVIDENCE_SETTINGS,
    ...LISTEN_SETTINGS,
    ...LIMIT_SETTINGS,
    // The attested TLS listener's admission settings, from their one table.
    ...ADMISSION_OPTIONS,
    'log-level': LOG_LEVEL_OPTION,
  },
  epilog: 'Kubernetes probes use the HTTP endpoints (/healthz liveness, /readyz readiness).',
  exitCodes: { 0: 'after a clean shutdown (SIGTERM/SIGINT)', 1: 'starting or serving failed' },
});
