/**
 * A free TCP port on one local address: listens on port 0, reads the port the kernel picked and
 * closes again. Another process may take the port before the caller binds it.
 */
import { createServer } from 'node:net';

/** Resolves to a port that was free on `host` a moment ago. */
export function freePortOn(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}
