/**
 * The attested TLS listener's admission settings (adapter layer, src/adapters/grpc/atls), declared
 * once: {@link AdmissionSettings} with its defaults, and {@link ADMISSION_SETTINGS}, one table
 * entry per setting the operator sets: its command-line flag, its one internal name (the key of
 * AdmissionSettings or of its `deadlines`), its default, its lower bound and its help text. The
 * join service's CLI builds its flags (and their `CONFBOOT_*` variables and --help lines) from the
 * table, and {@link admissionSettingsFrom} turns the parsed values into the listener's settings.
 */
import { availableParallelism } from 'node:os';
import type { HandshakePacingTunables } from './admission-sizing.js';

/** Deadlines of the phases in which the server waits for the peer, in ms. */
export interface AtlsDeadlines {
  /** From accept to a complete first TLS record (the ClientHello). */
  clientHelloMs: number;
  /**
   * From the ClientHello to the start of the TLS handshake: in a burst, connections wait in FIFO
   * order and start at the rate the event loop can finish them (admission-sizing.ts).
   */
  handshakeQueueMs: number;
  /** From the start of the TLS handshake to its end. */
  tlsHandshakeMs: number;
  /** From the end of the TLS handshake to the peer's whole ATTESTATION frame, plus the size floor. */
  attestationMs: number;
  /**
   * Bytes-per-second floor for the ATTESTATION frame body: a frame announcing L bytes gets
   * `attestationMs + L ÷ floor` in total.
   */
  attestationMinBytesPerSecond: number;
  /** From sending our VERDICT to receiving the peer's. */
  verdictMs: number;
}

/**
 * Default phase deadlines: a few seconds each for what the peer sends (an honest peer needs
 * milliseconds). The handshake queue is longer: a waiting connection holds a socket and its
 * ClientHello and no TLS state, and a 10,000-node burst is about 40 s of one core's handshakes, so
 * a 40 s queue lets such a burst wait its turn where a 20 s one refused about half of it at accept
 * and had those nodes retry (benchmark P2L: 1.04 against 0.15 retries per node).
 */
export const DEFAULT_ATLS_DEADLINES: Readonly<AtlsDeadlines> = Object.freeze({
  clientHelloMs: 5_000,
  handshakeQueueMs: 40_000,
  tlsHandshakeMs: 5_000,
  attestationMs: 10_000,
  attestationMinBytesPerSecond: 64 * 1024,
  verdictMs: 5_000,
});

/** Default unattested connections per source address. */
export const DEFAULT_MAX_PER_SOURCE = 32;
/**
 * Default unattested connections in total: a ceiling on memory (one waiting connection holds a
 * socket and its ClientHello, a few KiB, and no TLS state). How many may wait for their handshake
 * is sized from the measured handshake cost (admission-sizing.ts), well below this in practice.
 */
export const DEFAULT_MAX_UNATTESTED = 16_384;
/** Default attestation verifications run at once: twice the CPUs. */
export const DEFAULT_MAX_CONCURRENT_VERIFICATIONS = 2 * availableParallelism();

/** Checks `deadlines` (merged over the defaults) and returns them complete. */
export function resolveDeadlines(deadlines: Partial<AtlsDeadlines> | undefined): AtlsDeadlines {
  const d = { ...DEFAULT_ATLS_DEADLINES, ...deadlines };
  for (const [k, v] of Object.entries(d))
    if (!Number.isFinite(v) || v <= 0) throw new Error(`attested TLS deadline ${k} must be > 0, got ${v}`);
  return d;
}

/** Default quotes issued at once for inbound peers: one, so the node's own quotes wait for at most one. */
export const DEFAULT_MAX_CONCURRENT_ISSUANCE = 1;
/** Default inbound peers waiting for a quote. */
export const DEFAULT_MAX_QUEUED_ISSUANCE = 2;

/** The admission settings of an attested TLS listener; every one has a default. */
export interface AdmissionSettings {
  /** Unattested connections in total (default {@link DEFAULT_MAX_UNATTESTED}). */
  maxUnattested?: number;
  /** Unattested connections per source address (default {@link DEFAULT_MAX_PER_SOURCE}). */
  maxUnattestedPerSource?: number;
  /**
   * Attestation verifications run at once (CPU work; default
   * {@link DEFAULT_MAX_CONCURRENT_VERIFICATIONS}; 0 = no limit). Waiting for the peer holds none.
   */
  maxConcurrentVerifications?: number;
  /**
   * Our own attestations (TPM quotes) issued at once for inbound peers, each only after the peer's
   * ATTESTATION frame arrived (default {@link DEFAULT_MAX_CONCURRENT_ISSUANCE}).
   */
  maxConcurrentIssuance?: number;
  /**
   * Inbound peers waiting for one of those quotes (default {@link DEFAULT_MAX_QUEUED_ISSUANCE}); one
   * more is refused at once (check `issuer`, recoverable) instead of queueing on the TPM.
   */
  maxQueuedIssuance?: number;
  /**
   * Attested connections open at once (default unlimited). A slot is taken after the peer's
   * ATTESTATION frame has arrived and before it is verified, and is held until the TLS socket
   * closes, so a connection that could not be kept open is never verified (a burst waits, in FIFO
   * order, within the handshake timeout).
   */
  maxConnections?: number;
  /**
   * Attested connections open at once from one source, an IPv4 address or an IPv6 /64 (default
   * unlimited). Checked before the connection waits for a slot under `maxConnections`, so one source
   * cannot hold every slot; one more is dropped (`source-cap`) without being verified.
   */
  maxConnectionsPerSource?: number;
  /**
   * Connections in their TLS handshake at once (default unlimited). Each holds the native state of
   * a TLS handshake in progress (about 80 KiB with OpenSSL 3.5): at this cap, connections whose
   * ClientHello has arrived wait in the pacing's FIFO queue (so it needs `handshakePacing`). A peer
   * that stalls its TLS handshake holds a place until the TLS handshake deadline; one that stalls
   * after it (in the attestation exchange) holds none.
   */
  maxHandshakes?: number;
  /** Deadlines of the phases that wait for the peer (defaults {@link DEFAULT_ATLS_DEADLINES}). */
  deadlines?: Partial<AtlsDeadlines>;
  /** Bound on the TLS handshake plus the attestation exchange, in ms (default 30 000). */
  handshakeTimeoutMs?: number;
  /** At most one drop summary line per this interval (default 10 s). */
  dropLogIntervalMs?: number;
  /**
   * Tunables of the handshake pacing (admission-sizing.ts: handshakes start at the measured rate,
   * the rest wait up to `deadlines.handshakeQueueMs`); `false` starts every handshake at once
   * (tests that need the old behaviour).
   */
  handshakePacing?: false | HandshakePacingTunables;
}

/** One admission setting. */
export interface AdmissionSetting {
  /** The command-line flag, without dashes. */
  flag: string;
  /** Placeholder in --help. */
  valueName: string;
  default: number;
  /** Smallest value accepted: 1, or 0 where 0 means "no limit". */
  min: 0 | 1;
  /** One --help line. */
  description: string;
}

/** The settings that are counts (keys of {@link AdmissionSettings}). */
type CountKey = 'maxUnattestedPerSource' | 'maxUnattested' | 'maxConcurrentVerifications';

/** Every admission setting, by its internal name. */
export const ADMISSION_SETTINGS = {
  clientHelloMs: {
    flag: 'client-hello-timeout',
    valueName: 'MS',
    default: DEFAULT_ATLS_DEADLINES.clientHelloMs,
    min: 1,
    description: 'attested TLS: from accept to a complete ClientHello, in ms',
  },
  handshakeQueueMs: {
    flag: 'handshake-queue-timeout',
    valueName: 'MS',
    default: DEFAULT_ATLS_DEADLINES.handshakeQueueMs,
    min: 1,
    description:
      'attested TLS: longest a connection waits, after its ClientHello, for its TLS handshake to start, in ms (a burst queues; more than can start within it are closed at accept)',
  },
  tlsHandshakeMs: {
    flag: 'tls-handshake-timeout',
    valueName: 'MS',
    default: DEFAULT_ATLS_DEADLINES.tlsHandshakeMs,
    min: 1,
    description: 'attested TLS: from the start of the TLS handshake to its end, in ms',
  },
  attestationMs: {
    flag: 'attestation-timeout',
    valueName: 'MS',
    default: DEFAULT_ATLS_DEADLINES.attestationMs,
    min: 1,
    description:
      "attested TLS: from the TLS handshake to the node's whole ATTESTATION frame, in ms (plus size ÷ --attestation-min-rate)",
  },
  attestationMinBytesPerSecond: {
    flag: 'attestation-min-rate',
    valueName: 'BYTES/s',
    default: DEFAULT_ATLS_DEADLINES.attestationMinBytesPerSecond,
    min: 1,
    description: 'attested TLS: bytes-per-second floor for a large ATTESTATION frame',
  },
  verdictMs: {
    flag: 'verdict-timeout',
    valueName: 'MS',
    default: DEFAULT_ATLS_DEADLINES.verdictMs,
    min: 1,
    description: "attested TLS: from the service's VERDICT to the node's, in ms",
  },
  maxUnattestedPerSource: {
    flag: 'max-unattested-per-source',
    valueName: 'N',
    default: DEFAULT_MAX_PER_SOURCE,
    min: 1,
    description: 'unattested connections per source address; more are closed before TLS',
  },
  maxUnattested: {
    flag: 'max-unattested',
    valueName: 'N',
    default: DEFAULT_MAX_UNATTESTED,
    min: 1,
    description:
      'unattested connections in total; beyond it the heaviest source loses its oldest (or the new one is closed)',
  },
  maxConcurrentVerifications: {
    flag: 'max-concurrent-verifications',
    valueName: 'N',
    default: DEFAULT_MAX_CONCURRENT_VERIFICATIONS,
    min: 0,
    description: 'attestation verifications run at once (CPU work; default 2 × CPUs); 0 disables',
  },
} as const satisfies Record<keyof AtlsDeadlines | CountKey, AdmissionSetting>;

/** The internal name of an admission setting. */
export type AdmissionSettingName = keyof typeof ADMISSION_SETTINGS;

/** The listener's settings from values by internal name (missing ones keep their defaults). */
export function admissionSettingsFrom(
  values: Partial<Record<AdmissionSettingName, number>>,
): AdmissionSettings {
  const deadlines: Partial<AtlsDeadlines> = {};
  const counts: Pick<AdmissionSettings, CountKey> = {};
  for (const [name, value] of Object.entries(values) as Array<[AdmissionSettingName, number | undefined]>) {
    if (value === undefined) continue;
    if (name in DEFAULT_ATLS_DEADLINES) deadlines[name as keyof AtlsDeadlines] = value;
    else counts[name as CountKey] = value;
  }
  return { deadlines, ...counts };
}
