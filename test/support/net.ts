/** Free loopback ports for tests (random, on 127.0.0.0/8 only). */
import { createServer } from 'node:net';

/** Asks the kernel for a free TCP port on `host` (default 127.0.0.1). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('no port'));
      });
    });
  });
}
