/**
 * Worker thread entry of {@link WorkerCertificateAuthority} (adapter layer, src/adapters/pki): runs
 * one {@link FileCertificateAuthority} over the pki directory given in `workerData` and answers
 * `inspect` and `sign` requests from the parent thread. A request carries the CSR bytes (a copy:
 * structured clone) and, for `sign`, the checked identity and the parent's time; the answer is the result or the error's code
 * and message. The CA memoises a CSR's parse per byte array object, so equal CSR bytes are mapped to
 * one array here (a small content-keyed LRU): the deny-list check's inspection and the signature
 * share one parse and one signature check, as they do on the event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { KubeletIdentity } from '../../ports/certificate-authority.js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import { FileCertificateAuthority } from './file-certificate-authority.js';

/** A request from the parent thread. */
export type CaWorkerRequest =
  | { id: number; op: 'inspect'; der: Uint8Array }
  | { id: number; op: 'sign'; der: Uint8Array; identity: KubeletIdentity; nowMs: number };

/** The answer to one request. */
export type CaWorkerResponse =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; code: string; message: string };

/** Distinct CSRs whose byte array is kept for the CA's per-array memo. */
const CANONICAL_ENTRIES = 256;

function serve(pkiDir: string): void {
  const port = parentPort;
  if (port === null) throw new Error('ca-worker: not running in a worker thread');
  // The clock is only read by signKubeletCsr, which the worker never calls (it signs at the
  // parent's time through signKubeletCsrAt), and the CA never sleeps.
  const clock = {
    now: () => new Date(),
    sleep: () => Promise.reject(new Error('ca-worker: the CA does not sleep')),
  };
  const ca = new FileCertificateAuthority({ pkiDir, clock });
  const canonical = new Map<string, Uint8Array>();
  const canonicalOf = (der: Uint8Array): Uint8Array => {
    const key = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
    const known = canonical.get(key);
    if (known !== undefined) {
      canonical.delete(key);
      canonical.set(key, known);
      return known;
    }
    canonical.set(key, der);
    if (canonical.size > CANONICAL_ENTRIES) canonical.delete(canonical.keys().next().value as string);
    return der;
  };
  port.on('message', (req: CaWorkerRequest) => {
    const der = canonicalOf(req.der);
    const work =
      req.op === 'inspect' ? ca.inspectCsr(der) : ca.signKubeletCsrAt(der, req.identity, new Date(req.nowMs));
    work.then(
      (value) => port.postMessage({ id: req.id, ok: true, value } satisfies CaWorkerResponse),
      (err: unknown) =>
        port.postMessage({
          id: req.id,
          ok: false,
          code: isConfbootError(err) ? err.code : 'internal',
          message: messageOf(err),
        } satisfies CaWorkerResponse),
    );
  });
}

if (parentPort !== null) serve((workerData as { pkiDir: string }).pkiDir);
