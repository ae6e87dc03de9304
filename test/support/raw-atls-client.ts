/**
 * A raw attested-TLS client for attack and protocol tests: TLS 1.3 with ALPN h2 and a fresh
 * certificate of its own, handing back the socket and a frame reader so a test can speak (or
 * mangle) aTLS frames by hand. Used by the aTLS adapter tests and the attack suite.
 */
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { createTlsIdentity } from '../../src/adapters/grpc/atls/certificate.js';
import { FRAME_VERDICT, type Frame, FrameReader } from '../../src/adapters/grpc/atls/protocol.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import type { Clock } from '../../src/ports/clock.js';

/**
 * Connects to 127.0.0.1:`port` (from 127.0.0.1:`localPort` when given); rejects if the server
 * closes during the TLS handshake.
 */
export async function rawTlsClient(
  port: number,
  clock: Clock = new SystemClock(),
  options: { localPort?: number } = {},
): Promise<{ socket: TLSSocket; frames: FrameReader }> {
  const id = await createTlsIdentity(clock);
  const socket = tlsConnect({
    host: '127.0.0.1',
    port,
    ...(options.localPort !== undefined ? { localAddress: '127.0.0.1', localPort: options.localPort } : {}),
    key: id.keyPem,
    cert: id.certPem,
    rejectUnauthorized: false,
    ALPNProtocols: ['h2'],
    minVersion: 'TLSv1.3',
  });
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', () => resolve());
    socket.once('close', () => reject(new Error('closed during the TLS handshake')));
  });
  return { socket, frames: new FrameReader(socket) };
}

/**
 * Reads up to three frames until a verdict arrives or the connection ends (bounded by the server's
 * handshake timeout); returns the verdict frame or the read error.
 */
export async function readVerdict(frames: FrameReader): Promise<Frame | Error> {
  for (let i = 0; i < 3; i++) {
    const f = await frames.next().catch((e: Error) => e);
    if (f instanceof Error || f.type === FRAME_VERDICT) return f;
  }
  return new Error('no verdict within three frames');
}
