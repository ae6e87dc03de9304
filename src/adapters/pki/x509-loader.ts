/**
 * Lazy loading of @peculiar/x509 (adapter layer, src/adapters/pki): the library with its
 * reflect-metadata/tsyringe dependencies takes ~0.4 s to import, and nothing needs it before the
 * join service listens (it is first used by the first connection's TLS identity and the first
 * CSR). Modules that need it at run time call {@link loadX509} instead of importing it statically;
 * the first call imports it once and points it at Node's WebCrypto.
 */
import { webcrypto } from 'node:crypto';

/** The @peculiar/x509 module namespace. */
export type X509Module = typeof import('@peculiar/x509');

let loading: Promise<X509Module> | undefined;
let loaded: X509Module | undefined;

/** Imports @peculiar/x509 once (reflect-metadata first) and sets its crypto provider. */
export function loadX509(): Promise<X509Module> {
  loading ??= (async () => {
    await import('reflect-metadata');
    const imported = await import('@peculiar/x509');
    // Node gives the CommonJS build's exports by name; a bundler's code-split import may give them
    // only as `default` (confboot mini's in-VM CLI).
    const x509 = (
      'cryptoProvider' in imported ? imported : (imported as { default: X509Module }).default
    ) as X509Module;
    x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
    loaded = x509;
    return x509;
  })();
  return loading;
}

/** The module if {@link loadX509} has completed, else undefined (for synchronous fast paths). */
export function loadedX509(): X509Module | undefined {
  return loaded;
}
