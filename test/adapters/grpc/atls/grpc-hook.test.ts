/**
 * Canary for the grpc-js internals attested TLS hooks into. If any of these fail after a grpc-js
 * upgrade, the client side of attested TLS is broken: re-read
 * node_modules/@grpc/grpc-js/build/src/{channel-credentials,subchannel,transport}.js and update
 * src/adapters/grpc/atls/credentials.ts and docs/atls.md ("How the grpc-js hook works").
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AttestedChannelCredentials } from '../../../../src/adapters/grpc/atls/credentials.js';
import { checkGrpcJsInternals } from '../../../../src/adapters/grpc/atls/grpc-hook.js';
import { GrpcJoinTicketClient } from '../../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../../src/adapters/grpc/join-server.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { joinCallOf } from '../../../support/join-call.js';
import { clock, sampleTicket } from '../helpers.js';

const require = createRequire(import.meta.url);
const grpcDir = dirname(require.resolve('@grpc/grpc-js/package.json'));
const source = (file: string) => readFileSync(join(grpcDir, 'build/src', file), 'utf8');

const LOUD =
  'GRPC-JS INTERNALS CHANGED: attested TLS client credentials no longer hook into grpc-js. See docs/atls.md';

describe('grpc-js internals that attested TLS relies on', () => {
  it('the installed grpc-js is ~1.14 and exposes _createSecureConnector / createConnectionInjector', () => {
    const report = checkGrpcJsInternals();
    expect(report.problems, `${LOUD}\ngrpc-js ${report.version}: ${report.problems.join('\n')}`).toEqual([]);
  });

  it('subchannels still create their connector through credentials._createSecureConnector(target, options)', () => {
    expect(source('subchannel.js'), LOUD).toMatch(
      /credentials\._createSecureConnector\(channelTarget, options\)/,
    );
  });

  it('the transport still awaits waitForReady() and connect(tcpSocket), then runs HTTP/2 over the returned socket', () => {
    const transport = source('transport.js');
    expect(transport, LOUD).toMatch(/await secureConnector\.waitForReady\(\)/);
    expect(transport, LOUD).toMatch(/secureConnectResult = await secureConnector\.connect\(tcpConnection\)/);
    expect(transport, LOUD).toMatch(
      /createConnection: \(authority, option\) => \{\s*return secureConnectResult\.socket;/,
    );
  });

  it('the server injector still emits the socket on an HTTP/2 server as a connection', () => {
    expect(source('server.js'), LOUD).toMatch(
      /injectConnection: \(connection\) => \{\s*server\.emit\('connection', connection\);/,
    );
  });

  it('a real call through AttestedChannelCredentials goes through our connector (and only then reaches the handler)', async () => {
    let calls = 0;
    const server = createJoinServer({
      validators: [new DummyValidator()],
      clock,
      joinCall: joinCallOf({
        async issueJoinTicket() {
          calls++;
          return sampleTicket();
        },
        async issueRejoinTicket() {
          throw new Error('unused');
        },
      }),
    });
    try {
      const port = await server.listen('127.0.0.1', 0);
      const attested: string[] = [];
      const original = AttestedChannelCredentials.prototype._createSecureConnector;
      let connectorsCreated = 0;
      AttestedChannelCredentials.prototype._createSecureConnector = function (...args) {
        connectorsCreated++;
        return original.apply(this, args);
      };
      try {
        const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
        await client.issueRejoinTicket(`127.0.0.1:${port}`, { diskUuid: 'x' }).catch(() => {});
        const ticket = await client.issueJoinTicket(`127.0.0.1:${port}`, {
          diskUuid: 'x',
          certificateRequest: new Uint8Array(0),
          isControlPlane: false,
          hostPublicKey: new Uint8Array(0),
          hostCertificatePrincipals: [],
        });
        attested.push(ticket.token);
      } finally {
        AttestedChannelCredentials.prototype._createSecureConnector = original;
      }
      expect(connectorsCreated, LOUD).toBeGreaterThanOrEqual(2);
      expect(attested).toEqual(['abcdef.0123456789abcdef']);
      expect(calls).toBe(1);
    } finally {
      await server.shutdown(100);
    }
  });
});
