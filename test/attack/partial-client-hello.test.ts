/**
 * A peer that sends only the first bytes of a TLS record (here `16 03 01`, the start of a
 * ClientHello's record header) and then waits, or closes. The listener keeps what it has read until
 * the record is complete; it once gave an incomplete record back to the socket from its 'readable'
 * handler, which made Node emit 'readable' again on every tick and starved the event loop: three
 * bytes stopped the whole join service (timers, other connections, everything). Without the fix
 * this file never finishes; with it, both peers are dropped for the right reason while the
 * process stays responsive.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { AttestedTlsListener } from '../../src/adapters/grpc/atls/listener.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function partialPeer(port: number, close: boolean): Promise<Socket> {
  const s = connect({ port, host: '127.0.0.1' });
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  s.write(Buffer.from([0x16, 0x03, 0x01]));
  if (close) s.end();
  cleanups.push(() => s.destroy());
  return s;
}

it('three bytes of a TLS record, then silence or a close: both dropped, the process stays responsive', async () => {
  const drops: string[] = [];
  const listener = new AttestedTlsListener(
    { validators: [], clock: new SystemClock(), deadlines: { clientHelloMs: 300 } },
    (s) => s.destroy(),
  );
  listener.onDropped = (_a, reason) => drops.push(reason);
  const port = await listener.listen('127.0.0.1', 0);
  cleanups.push(() => listener.close());

  await partialPeer(port, true);
  await partialPeer(port, false);
  // A timer in the same process fires while both are pending (it could not while the loop spun).
  let ticks = 0;
  await new Promise<void>((resolve) => {
    const t = setInterval(() => {
      ticks++;
      if (drops.length >= 2 || ticks >= 200) {
        clearInterval(t);
        resolve();
      }
    }, 10);
  });
  expect(ticks).toBeGreaterThan(0);
  expect(drops.sort()).toEqual(['client-hello-timeout', 'peer-closed']);
}, 30_000);
