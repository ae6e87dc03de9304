/**
 * The NitroTPM vendor-command attestor: its request/response CBOR and command bytes, and the NV
 * exchange through tpm2-tools on a REAL swtpm. swtpm has no Nitro system, so the vendor command
 * itself cannot succeed here: the test shows every tool step runs, the TPM's refusal is reported
 * and the temporary NV index is always released.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { decode, encode } from 'cbor2';
import { describe, expect, it } from 'vitest';
import {
  decodeNsmAttestationResponse,
  encodeNsmAttestationRequest,
  NitroTpmNsmAttestor,
  nsmVendorCommand,
} from '../../../src/adapters/tpm/nitrotpm-nsm.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useSwtpm } from '../../support/swtpm.js';

const run = promisify(execFile);
const swtpm = useSwtpm();

describe('NitroTPM NSM request codec', () => {
  it('encodes {"Attestation": {user_data, nonce, public_key}} with absent fields as null', () => {
    const req = encodeNsmAttestationRequest({ nonce: Uint8Array.of(1, 2), publicKey: Uint8Array.of(3) });
    const decoded = decode(req, { preferMap: true }) as Map<string, Map<string, unknown>>;
    const inner = decoded.get('Attestation');
    expect([...(inner?.keys() ?? [])]).toEqual(['user_data', 'nonce', 'public_key']);
    expect(inner?.get('user_data')).toBeNull();
    expect(Buffer.from(inner?.get('nonce') as Uint8Array)).toEqual(Buffer.from([1, 2]));
    expect(Buffer.from(inner?.get('public_key') as Uint8Array)).toEqual(Buffer.from([3]));
  });

  it('refuses oversized fields', () => {
    expect(() =>
      encodeNsmAttestationRequest({ nonce: new Uint8Array(513), publicKey: new Uint8Array(1) }),
    ).toThrow(/nonce has 513 bytes/);
    expect(() =>
      encodeNsmAttestationRequest({ nonce: new Uint8Array(1), publicKey: new Uint8Array(1025) }),
    ).toThrow(/public_key has 1025 bytes/);
  });

  it('decodes the document from the NV contents, ignoring the 0xff padding', () => {
    const doc = Uint8Array.of(0x84, 1, 2, 3);
    const body = encode(new Map([['Attestation', new Map([['document', doc]])]]));
    const padded = Buffer.concat([body, Buffer.alloc(100, 0xff)]);
    expect(Buffer.from(decodeNsmAttestationResponse(padded))).toEqual(Buffer.from(doc));
  });

  it("reports the Nitro system's error, and garbage, as unavailable", () => {
    const refused = encode(new Map([['Error', 'InvalidArgument']]));
    expect(() => decodeNsmAttestationResponse(refused)).toThrow(
      /refused the attestation request: InvalidArgument/,
    );
    for (const raw of [new Uint8Array(0), Uint8Array.of(0xff, 0xff), encode(new Map([['x', 1]]))]) {
      const err = (() => {
        try {
          decodeNsmAttestationResponse(raw);
        } catch (e) {
          return e;
        }
      })();
      expect(isConfbootError(err) && err.code).toBe('unavailable');
    }
  });

  it('builds the vendor command 0x20000001 with the NV index as auth and NV handle and a password session', () => {
    expect(Buffer.from(nsmVendorCommand(0x01000100)).toString('hex')).toBe(
      [
        '8002',
        '0000001f',
        '20000001',
        '01000100',
        '01000100',
        '00000009',
        '40000009',
        '0000',
        '00',
        '0000',
      ].join(''),
    );
  });
});

describe('NitroTPM NSM exchange on a REAL swtpm (no Nitro system here: the vendor command cannot succeed)', () => {
  it('runs the NV steps, reports the TPM refusing the vendor command, and releases the NV index', async () => {
    const s = await swtpm();
    const attestor = new NitroTpmNsmAttestor({ tcti: s.tcti, nvSize: 2048 });
    const err = await attestor
      .attestationDocument({ nonce: new Uint8Array(32), publicKey: new Uint8Array(294) })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(String((err as Error).message)).toMatch(
      /vendor command answered TPM_RC 0x143 \(TPM_RC_COMMAND_CODE/,
    );
    const { stdout } = await run('tpm2_getcap', ['handles-nv-index'], {
      env: { ...process.env, TPM2TOOLS_TCTI: s.tcti },
      timeout: 10_000,
    });
    expect(stdout).not.toMatch(/0x1000100/i);
  });
});
