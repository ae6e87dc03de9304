/** The init secret's bcrypt check (upstream hashes the init secret with bcrypt), on bcryptjs. */
import bcrypt from 'bcryptjs';
import type { SecretHash } from '../../ports/secret-hash.js';

export class BcryptSecretHash implements SecretHash {
  async matches(hash: Uint8Array, secret: Uint8Array): Promise<boolean> {
    const h = Buffer.from(hash).toString('utf8').trim();
    if (!/^\$2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}$/.test(h)) return false;
    // bcrypt uses only the first 72 bytes; compare as latin1 so arbitrary bytes survive.
    return bcrypt.compare(Buffer.from(secret).toString('latin1'), h);
  }
}

/** Hashes an init secret for metadata (`constellation-init-secret-hash`), cost 10 by default. */
export async function hashInitSecret(secret: Uint8Array, cost = 10): Promise<string> {
  return bcrypt.hash(Buffer.from(secret).toString('latin1'), cost);
}
