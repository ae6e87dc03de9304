/** Free loopback ports and a plain HTTP(S) request for tests (on 127.0.0.0/8 only). */
import { request as httpRequest, type RequestOptions } from 'node:http';
import { type RequestOptions as HttpsRequestOptions, request as httpsRequest } from 'node:https';
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

/**
 * One request on loopback (`https: true` with `ca`/`servername` for TLS); resolves to the status and
 * the body as text.
 */
export function requestText(
  options: (RequestOptions & { https?: false }) | (HttpsRequestOptions & { https: true }),
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const { https, ...rest } = options;
    const req = (https ? httpsRequest : httpRequest)({ host: '127.0.0.1', ...rest }, (res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
