/** In-memory BootstrapTokens: real token format and TTL bookkeeping, under an injected clock. */
import { createHash, randomInt } from 'node:crypto';
import type { BootstrapTokens } from '../../src/ports/bootstrap-tokens.js';
import type { Clock } from '../../src/ports/clock.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const pick = (n: number) => Array.from({ length: n }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');

export class FakeBootstrapTokens implements BootstrapTokens {
  readonly tokens = new Map<string, { secret: string; expires: Date }>();
  /** Order of calls, to check that the token is created before the CA hash is read. */
  readonly calls: Array<'createToken' | 'discoveryCaCertHash'> = [];
  createError: Error | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly caSpki: Uint8Array = new TextEncoder().encode('fake CA SPKI'),
  ) {}

  async createToken(ttlMs: number): Promise<string> {
    this.calls.push('createToken');
    if (this.createError) throw this.createError;
    const id = pick(6);
    const secret = pick(16);
    this.tokens.set(id, { secret, expires: new Date(this.clock.now().getTime() + ttlMs) });
    return `${id}.${secret}`;
  }

  async discoveryCaCertHash(): Promise<string> {
    this.calls.push('discoveryCaCertHash');
    return `sha256:${createHash('sha256').update(this.caSpki).digest('hex')}`;
  }

  /** Whether `token` exists and has not expired at the clock's now. */
  isValid(token: string): boolean {
    const [id, secret] = token.split('.');
    const t = this.tokens.get(id ?? '');
    return t !== undefined && t.secret === secret && t.expires > this.clock.now();
  }
}
