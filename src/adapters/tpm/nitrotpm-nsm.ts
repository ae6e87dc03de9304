/**
 * The NitroTPM's way to AWS's signed attestation document (what AWS's `nitro-tpm-attest` does): the
 * request, CBOR `{"Attestation": {"user_data", "nonce", "public_key"}}` (absent fields null), is
 * written to a temporary owner-defined NV index (authread|authwrite, empty auth); the vendor command
 * TPM2_CC 0x20000001 with that index as auth handle and NV index (password session) makes the Nitro
 * system replace the index's contents with CBOR `{"Attestation": {"document": bytes}}` or
 * `{"Error": name}`, padded with 0xff; the index is then read and always undefined again.
 *
 * {@link NitroTpmNsmAttestor} runs these steps through tpm2-tools in the TCTI's queue of
 * tpm2-tools-tpm.ts (tpm2_nvdefine, tpm2_nvwrite, tpm2_send, tpm2_nvread, tpm2_nvundefine). Only a
 * NitroTPM knows the vendor command; any other TPM answers TPM_RC_COMMAND_CODE.
 */
import { decodeSequence, encode } from 'cbor2';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { NitroTpmAttestationRequest, NitroTpmAttestor } from '../../ports/nitrotpm-attestor.js';
import type { CallOptions } from '../../ports/types.js';
import { Tpm2ToolsTpm } from './tpm2-tools-tpm.js';

/** AWS's vendor-specific command code of an NSM request through the NitroTPM. */
export const TPM2_CC_AWS_NSM_REQUEST = 0x20000001;
/** NV index size the exchange defines (the response, a ~5 KiB document, must fit). */
export const NSM_NV_SIZE = 8192;
const MAX_FIELD = 512;
const MAX_PUBLIC_KEY = 1024;

/** The CBOR request of one attestation (serde's externally tagged `Request::Attestation`). */
export function encodeNsmAttestationRequest(request: NitroTpmAttestationRequest): Uint8Array {
  const check = (b: Uint8Array | undefined, max: number, what: string) => {
    if (b !== undefined && b.length > max)
      throw new ConfbootError(
        'invalid-argument',
        `NitroTPM request: ${what} has ${b.length} bytes, at most ${max}`,
      );
  };
  check(request.nonce, MAX_FIELD, 'nonce');
  check(request.userData, MAX_FIELD, 'user_data');
  check(request.publicKey, MAX_PUBLIC_KEY, 'public_key');
  const bytes = (b: Uint8Array | undefined) => (b === undefined ? null : new Uint8Array(b));
  return encode(
    new Map([
      [
        'Attestation',
        new Map<string, Uint8Array | null>([
          ['user_data', bytes(request.userData)],
          ['nonce', bytes(request.nonce)],
          ['public_key', bytes(request.publicKey)],
        ]),
      ],
    ]),
  );
}

/**
 * Decodes the NV index contents after the vendor command: the document, or an error naming the
 * Nitro system's error code. Trailing 0xff padding is ignored.
 */
export function decodeNsmAttestationResponse(raw: Uint8Array): Uint8Array {
  let value: unknown;
  try {
    value = decodeSequence(raw, { preferMap: true }).next().value;
  } catch (err) {
    throw new ConfbootError('unavailable', `NitroTPM response is not CBOR: ${messageOf(err)}`, {
      cause: err,
    });
  }
  if (value instanceof Map) {
    const attestation = value.get('Attestation');
    const document = attestation instanceof Map ? attestation.get('document') : undefined;
    if (document instanceof Uint8Array && document.length > 0) return new Uint8Array(document);
    const error = value.get('Error');
    if (error !== undefined)
      throw new ConfbootError(
        'unavailable',
        `the Nitro system refused the attestation request: ${String(error)}`,
      );
  }
  throw new ConfbootError('unavailable', 'NitroTPM response holds neither a document nor an error');
}

/** The vendor command with `nvIndex` as auth and NV handle and an empty-password session. */
export function nsmVendorCommand(nvIndex: number): Uint8Array {
  const b = Buffer.alloc(31);
  b.writeUInt16BE(0x8002, 0); // TPM_ST_SESSIONS
  b.writeUInt32BE(31, 2);
  b.writeUInt32BE(TPM2_CC_AWS_NSM_REQUEST, 6);
  b.writeUInt32BE(nvIndex, 10);
  b.writeUInt32BE(nvIndex, 14);
  b.writeUInt32BE(9, 18); // authorizationSize
  b.writeUInt32BE(0x40000009, 22); // TPM_RS_PW; nonce size 0, attributes 0, hmac size 0 follow
  return new Uint8Array(b);
}

/** Options of {@link NitroTpmNsmAttestor}. */
export interface NitroTpmNsmAttestorOptions {
  /** TCTI of the NitroTPM, e.g. `device:/dev/tpmrm0`. */
  tcti: string;
  /** Directory of the tpm2_* tools, default PATH. */
  toolsDir?: string;
  /** Deadline when the call gives none, default 20000 ms. */
  timeoutInMs?: number;
  /** Size of the NV index defined for the exchange, default {@link NSM_NV_SIZE}. */
  nvSize?: number;
}

/** {@link NitroTpmAttestor} over the NitroTPM vendor command, through tpm2-tools. */
export class NitroTpmNsmAttestor implements NitroTpmAttestor {
  private readonly tpm: Tpm2ToolsTpm;
  private readonly nvSize: number;

  constructor(options: NitroTpmNsmAttestorOptions) {
    this.tpm = new Tpm2ToolsTpm({
      tcti: options.tcti,
      createAttestationKey: false,
      ...(options.toolsDir === undefined ? {} : { toolsDir: options.toolsDir }),
      ...(options.timeoutInMs === undefined ? {} : { timeoutInMs: options.timeoutInMs }),
    });
    this.nvSize = options.nvSize ?? NSM_NV_SIZE;
  }

  /** {@inheritDoc NitroTpmAttestor.attestationDocument} */
  async attestationDocument(request: NitroTpmAttestationRequest, options?: CallOptions): Promise<Uint8Array> {
    const raw = await this.tpm.vendorNvExchange(
      encodeNsmAttestationRequest(request),
      nsmVendorCommand,
      this.nvSize,
      options,
    );
    return decodeNsmAttestationResponse(raw);
  }
}
