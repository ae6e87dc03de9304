/**
 * The grpc-js internals attested TLS depends on (adapter layer, src/adapters/grpc/atls), checked in
 * one place so that a grpc-js upgrade fails loudly instead of silently falling back to something
 * unattested. Client side: grpc-js ~1.14 calls `credentials._createSecureConnector(target, options,
 * callCredentials)` once per subchannel and then `connector.waitForReady()`, `connector.connect(tcpSocket)`
 * (→ `{socket, secure}`), `connector.getCallCredentials()`, `connector.destroy()`. Server side:
 * `Server.createConnectionInjector(credentials).injectConnection(socket)` (public since 1.11).
 */
import { createRequire } from 'node:module';
import { ChannelCredentials, Server, ServerCredentials } from '@grpc/grpc-js';

/** The grpc-js minor line this code was written and tested against. */
export const SUPPORTED_GRPC_JS = { major: 1, minor: 14 } as const;

/** Result of {@link checkGrpcJsInternals}: the installed version and every problem found. */
export interface GrpcJsInternalsReport {
  version: string;
  problems: string[];
}

/** Inspects the installed grpc-js for the internal contract attested TLS relies on. */
export function checkGrpcJsInternals(): GrpcJsInternalsReport {
  const problems: string[] = [];
  const require = createRequire(import.meta.url);
  const pkg = require('@grpc/grpc-js/package.json') as { version?: string };
  const version = pkg.version ?? 'unknown';
  const m = /^(\d+)\.(\d+)\.\d+/.exec(version);
  if (!m || Number(m[1]) !== SUPPORTED_GRPC_JS.major || Number(m[2]) !== SUPPORTED_GRPC_JS.minor)
    problems.push(
      `@grpc/grpc-js ${version} is outside ~${SUPPORTED_GRPC_JS.major}.${SUPPORTED_GRPC_JS.minor}; the internal _createSecureConnector contract must be re-checked`,
    );
  const insecure = ChannelCredentials.createInsecure() as unknown as Record<string, unknown>;
  const create = insecure._createSecureConnector;
  if (typeof create !== 'function')
    problems.push('ChannelCredentials no longer has _createSecureConnector (internal API changed)');
  else {
    if (create.length !== 3)
      problems.push(
        `_createSecureConnector takes ${create.length} parameters, expected 3 (target, options, callCredentials)`,
      );
    const connector = (create as (...a: unknown[]) => Record<string, unknown>).call(
      insecure,
      { scheme: 'dns', authority: undefined, path: '127.0.0.1:1' },
      {},
      undefined,
    );
    for (const name of ['connect', 'waitForReady', 'getCallCredentials', 'destroy'])
      if (typeof connector?.[name] !== 'function')
        problems.push(`SecureConnector.${name} is missing (internal API changed)`);
  }
  for (const name of ['_isSecure', '_equals'])
    if (typeof insecure[name] !== 'function') problems.push(`ChannelCredentials.${name} is missing`);
  const server = Server.prototype as unknown as Record<string, unknown>;
  if (typeof server.createConnectionInjector !== 'function')
    problems.push('Server.createConnectionInjector is missing (needs grpc-js >= 1.11)');
  if (typeof ServerCredentials.createInsecure !== 'function')
    problems.push('ServerCredentials.createInsecure is missing');
  return { version, problems };
}

let checked: GrpcJsInternalsReport | undefined;

/** Throws a clear error if the installed grpc-js breaks the contract; cached after the first call. */
export function assertGrpcJsInternals(): void {
  checked ??= checkGrpcJsInternals();
  if (checked.problems.length > 0)
    throw new Error(
      `attested TLS cannot hook into @grpc/grpc-js ${checked.version}: ${checked.problems.join('; ')}. ` +
        'See docs/atls.md ("How the grpc-js hook works").',
    );
}
