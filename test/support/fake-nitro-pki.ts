/**
 * A FAKE AWS Nitro attestation PKI and Nitro system for tests (AWS's cannot exist here): a P-384
 * root → intermediate → leaf chain (OU=FAKE test PKI) and NitroTPM attestation documents signed
 * like AWS's (COSE_Sign1, protected header {1: -35}, ES384 over the Sig_structure), whose PCRs come
 * from the TPM being attested. Validators trust it by pinning {@link FakeNitroPki.rootSha256}.
 */
import 'reflect-metadata';
import { createHash, sign as cryptoSign, KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { encode } from 'cbor2';
import type { NitroTpmAttestationRequest, NitroTpmAttestor } from '../../src/ports/nitrotpm-attestor.js';
import type { CallOptions } from '../../src/ports/types.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const subtle = webcrypto.subtle;
const EC_P384 = { name: 'ECDSA', namedCurve: 'P-384' };
const ECDSA_SHA384 = { name: 'ECDSA', hash: 'SHA-384' };
const DN = 'OU=FAKE test PKI, O=Amazon, C=US';

/** What one fake document holds besides the PKI's certificates. */
export interface FakeNitroDocumentInput {
  pcrs: ReadonlyMap<number, Uint8Array>;
  nonce?: Uint8Array;
  publicKey?: Uint8Array;
  userData?: Uint8Array;
  moduleId?: string;
  timestamp?: Date;
}

/** The fake PKI: its certificates (DER) and a signer of documents. */
export interface FakeNitroPki {
  /** SHA-256 of the root's DER, to pin. */
  rootSha256: string;
  root: Uint8Array;
  intermediate: Uint8Array;
  leaf: Uint8Array;
  /** When every certificate is valid (2020 … 2040). */
  validAt: Date;
  /** A signed document with these contents. */
  sign(input: FakeNitroDocumentInput): Uint8Array;
}

/** Creates a fresh fake Nitro PKI. */
export async function createFakeNitroPki(): Promise<FakeNitroPki> {
  const gen = async () =>
    (await subtle.generateKey(EC_P384, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const keys = { root: await gen(), intermediate: await gen(), leaf: await gen() };
  const ca = [
    new x509.BasicConstraintsExtension(true, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ];
  const window = { notBefore: new Date('2020-01-01T00:00:00Z'), notAfter: new Date('2040-01-01T00:00:00Z') };
  const cert = (
    serial: string,
    cn: string,
    issuer: string,
    key: webcrypto.CryptoKey,
    signer: webcrypto.CryptoKey,
    ext: x509.Extension[],
  ) =>
    x509.X509CertificateGenerator.create({
      serialNumber: serial,
      subject: `CN=${cn}, ${DN}`,
      issuer: `CN=${issuer}, ${DN}`,
      ...window,
      publicKey: key,
      signingKey: signer,
      signingAlgorithm: ECDSA_SHA384,
      extensions: ext,
    });
  const root = await cert(
    '01',
    'fake.nitro-enclaves',
    'fake.nitro-enclaves',
    keys.root.publicKey,
    keys.root.privateKey,
    ca,
  );
  const inter = await cert(
    '02',
    'fake.nitro-intermediate',
    'fake.nitro-enclaves',
    keys.intermediate.publicKey,
    keys.root.privateKey,
    ca,
  );
  const leaf = await cert(
    '03',
    'i-0fake-tpm',
    'fake.nitro-intermediate',
    keys.leaf.publicKey,
    keys.intermediate.privateKey,
    [new x509.BasicConstraintsExtension(false, undefined, true)],
  );
  const leafKey = KeyObject.from(keys.leaf.privateKey);
  const der = (c: x509.X509Certificate) => new Uint8Array(c.rawData);
  const protectedHeader = encode(new Map([[1, -35]]));
  return {
    rootSha256: createHash('sha256').update(der(root)).digest('hex'),
    root: der(root),
    intermediate: der(inter),
    leaf: der(leaf),
    validAt: new Date('2030-01-01T00:00:00Z'),
    sign(input) {
      const bytes = (b: Uint8Array | undefined) => (b === undefined ? null : new Uint8Array(b));
      const payload = encode(
        new Map<string, unknown>([
          ['module_id', input.moduleId ?? 'i-0fake0000000000000-tpm0000000000000000'],
          ['digest', 'SHA384'],
          ['timestamp', (input.timestamp ?? new Date('2030-01-01T00:00:00Z')).getTime()],
          ['nitrotpm_pcrs', new Map([...input.pcrs].map(([i, v]) => [i, new Uint8Array(v)]))],
          ['certificate', der(leaf)],
          ['cabundle', [der(root), der(inter)]],
          ['public_key', bytes(input.publicKey)],
          ['user_data', bytes(input.userData)],
          ['nonce', bytes(input.nonce)],
        ]),
      );
      const toBeSigned = encode(['Signature1', protectedHeader, new Uint8Array(0), payload]);
      const signature = cryptoSign('sha384', toBeSigned, { key: leafKey, dsaEncoding: 'ieee-p1363' });
      return encode([protectedHeader, new Map(), payload, new Uint8Array(signature)]);
    },
  };
}

/**
 * A FAKE Nitro system answering the NitroTPM's attestation request: it reads the SHA-384 PCRs of the
 * TPM it serves (as the real one reads the NitroTPM's) and signs with `pki`. Requests are recorded.
 */
export class FakeNitroTpmAttestor implements NitroTpmAttestor {
  readonly requests: NitroTpmAttestationRequest[] = [];

  constructor(
    private readonly pki: FakeNitroPki,
    private readonly sha384Pcrs: (options?: CallOptions) => Promise<ReadonlyMap<number, Uint8Array>>,
    private readonly edit: (input: FakeNitroDocumentInput) => FakeNitroDocumentInput = (i) => i,
  ) {}

  async attestationDocument(request: NitroTpmAttestationRequest, options?: CallOptions): Promise<Uint8Array> {
    this.requests.push(request);
    const input: FakeNitroDocumentInput = {
      pcrs: await this.sha384Pcrs(options),
      nonce: request.nonce,
      publicKey: request.publicKey,
      ...(request.userData ? { userData: request.userData } : {}),
    };
    return this.pki.sign(this.edit(input));
  }
}
