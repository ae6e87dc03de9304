/**
 * Join service: a Validator decorator that times every validation for the latency histogram. The
 * attested TLS layer calls validators during the handshake, before any RPC exists, so timing the
 * validator itself is the one place that measures attestation cost alone (TLS and framing
 * excluded). Variant and OID are read through on every access, so an updatable validator behind it
 * keeps working.
 */
import type { CallOptions } from '../../ports/types.js';
import type { ValidationResult, Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';

/** Receives one validation's duration. */
export type ValidationObserver = (sample: { variant: Variant; ok: boolean; seconds: number }) => void;

/** Wraps `inner` so that every `validate` reports its duration to `observe`. */
export class TimedValidator implements Validator {
  constructor(
    private readonly inner: Validator,
    private readonly observe: ValidationObserver,
  ) {}

  /** {@inheritDoc Validator.variant} */
  get variant(): Variant {
    return this.inner.variant;
  }

  /** {@inheritDoc Validator.oid} */
  get oid(): string {
    return this.inner.oid;
  }

  /** {@inheritDoc Validator.validate} */
  async validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    const variant = this.inner.variant;
    const started = process.hrtime.bigint();
    let ok = false;
    try {
      const result = await this.inner.validate(document, nonce, options);
      ok = true;
      return result;
    } finally {
      this.observe({ variant, ok, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
    }
  }
}
