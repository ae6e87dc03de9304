/**
 * The variant-independent core of vTPM verification, shared by the document validator and
 * `confboot attestation verify --format pb`: given a go-tpm-tools Attestation, the expected TPM
 * nonce and a trusted AK, verify the SHA-256 quote itself (signature, extraData, selection, digest —
 * never a SHA-1 quote, never "whichever bank verifies first" as upstream does)
 * and replay the event log, if any, against the quoted PCRs.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { parseTpmtPublic, type TpmtPublic } from '../../tpm/tpm2-public.js';
import { algName, TpmAlg, TpmaObject } from '../../tpm/tpm2-wire.js';
import { checkEventLogAgainstPcrs, parseEventLog, type TcgEventLog } from '../eventlog/tcg-log.js';
import type { CheckRecorder } from '../shared/checks.js';
import type { TpmAttestation } from '../shared/vtpm-document.js';
import { type VerifiedQuote, verifyQuote } from './quote.js';

/** What a verified attestation proves. */
export interface VerifiedAttestation {
  ak: TpmtPublic;
  /** The verified SHA-256 quote; its PCRs are the ones to compare with measurements. */
  quote: VerifiedQuote;
  /** The event log, replay-checked against the quote, if the attestation carried one. */
  eventLog?: TcgEventLog;
}

/**
 * Parses the AK and checks it is a restricted signing key (only such a key can only sign
 * TPM-generated structures, so its signature proves the TPMS_ATTEST came from a TPM).
 */
export function parseAttestationKey(akPub: Uint8Array, rec: CheckRecorder): TpmtPublic {
  if (akPub.length === 0) throw rec.fail('ak-public-format', 'attestation has no ak_pub');
  const ak = rec.run(() => parseTpmtPublic(akPub));
  const need = TpmaObject.sign | TpmaObject.restricted;
  if ((ak.attributes & need) !== need || ak.attributes & TpmaObject.decrypt) {
    throw rec.fail(
      'ak-attributes',
      `attestation key attributes 0x${ak.attributes.toString(16)} are not those of a restricted signing key`,
    );
  }
  const desc = ak.type === TpmAlg.RSA ? `RSA-${ak.keyBits}` : `ECC P-${ak.keyBits}`;
  rec.pass('ak-attributes', `${desc} restricted signing key, nameAlg ${algName(ak.nameAlg)}`);
  return ak;
}

/** Returns true when `ak`'s public key equals `key` (compared as SPKI DER). */
export function sameKey(ak: TpmtPublic, key: KeyObject | string): boolean {
  const other = typeof key === 'string' ? createPublicKey(key) : key;
  const a = ak.publicKey.export({ type: 'spki', format: 'der' });
  const b = other.export({ type: 'spki', format: 'der' });
  return a.equals(b);
}

/**
 * Records `ak-trust`: the document's AK is `key`, which `keyName` names ("the trusted AK"), with the
 * one text of an untrusted AK.
 * @throws AttestationError (`ak-trust`) when it is another key
 */
export function requireAk(
  rec: CheckRecorder,
  ak: TpmtPublic,
  key: KeyObject | string,
  keyName: string,
): void {
  if (!sameKey(ak, key))
    throw rec.fail('ak-trust', `untrusted attestation public key: it differs from ${keyName}`);
  rec.pass('ak-trust', `attestation key equals ${keyName}`);
}

/**
 * Verifies the SHA-256 quote of `att` with `ak` against `tpmNonce` and replays the event log.
 * Records `sha256-quote`, the quote checks, and `event-log`.
 * @throws AttestationError naming the failed check
 */
export function verifyAttestationQuotes(
  att: TpmAttestation,
  ak: TpmtPublic,
  tpmNonce: Uint8Array,
  rec: CheckRecorder,
): VerifiedAttestation {
  if (att.quotes.length === 0) throw rec.fail('sha256-quote', 'attestation has no quotes');
  const sha256 = att.quotes.filter((q) => q.pcrHashAlg === TpmAlg.SHA256);
  if (sha256.length === 0) {
    const banks = att.quotes.map((q) => algName(q.pcrHashAlg)).join(', ');
    throw rec.fail('sha256-quote', `no sha256 quote (document has ${banks}); SHA-1 quotes are not accepted`);
  }
  if (sha256.length > 1) throw rec.fail('sha256-quote', `${sha256.length} sha256 quotes; want exactly one`);
  rec.pass('sha256-quote', `${att.quotes.length} quote(s), using the SHA256 bank`);
  const quote = verifyQuote(ak, sha256[0] as (typeof sha256)[0], tpmNonce, rec);

  if (att.eventLog.length === 0) {
    rec.pass('event-log', 'no event log in the attestation');
    return { ak, quote };
  }
  const eventLog = rec.run(() => parseEventLog(att.eventLog));
  const mismatches = rec.run(() => checkEventLogAgainstPcrs(eventLog, TpmAlg.SHA256, quote.pcrs));
  if (mismatches.length > 0) {
    const list = mismatches
      .map(
        (m) =>
          `PCR${m.pcr} replays to ${Buffer.from(m.replayed).toString('hex')}, quoted ${m.quoted ? Buffer.from(m.quoted).toString('hex') : '(missing)'}`,
      )
      .join('; ');
    throw rec.fail('event-log', `event log does not replay to the quoted PCRs: ${list}`);
  }
  rec.pass(
    'event-log',
    `${eventLog.format} log, ${eventLog.events.length} events, replays to the quoted SHA256 PCRs`,
  );
  return { ak, quote, eventLog };
}
