/**
 * The cluster CA's CPU work on worker threads (adapter layer, src/adapters/pki): a
 * {@link CertificateAuthority} that runs CSR inspection and kubelet signing — @peculiar/x509's ASN.1
 * parsing and encoding, the largest CPU item of a join — in `workers` worker threads (ca-worker.ts,
 * each with its own {@link FileCertificateAuthority} over the same pki directory), so the join
 * service's event loop keeps handling handshakes and calls meanwhile. The control-plane files are
 * read on the calling thread. A CSR always goes to the same worker (chosen by its bytes), so its
 * inspection and its signature share one parse there. Signatures use this thread's clock. A worker
 * that fails or exits fails its pending calls (`internal`) and is started again by the next call.
 * When the worker entry file does not exist (the TypeScript source run directly, as in tests), the
 * CSR work runs on the calling thread instead ({@link WorkerCertificateAuthority.onWorkers}).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CertificateAuthority, CsrInfo, KubeletIdentity } from '../../ports/certificate-authority.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, type ConfbootErrorCode } from '../../ports/errors.js';
import type { ControlPlaneFile } from '../../ports/types.js';
import type { CaWorkerRequest, CaWorkerResponse } from './ca-worker.js';
import { DEFAULT_PKI_DIR, FileCertificateAuthority } from './file-certificate-authority.js';

/** Options of {@link WorkerCertificateAuthority}. */
export interface WorkerCertificateAuthorityOptions {
  clock: Clock;
  /** The kubeadm pki directory (default /etc/kubernetes/pki). */
  pkiDir?: string;
  /** Worker threads (default 1). */
  workers?: number;
  /** The worker entry (default ca-worker.js next to this module). */
  workerUrl?: URL;
}

/**
 * `bytes` as an array that owns exactly its bytes. A message to a worker copies a typed array's whole
 * ArrayBuffer, and a CSR decoded from a gRPC request is a view into the 64 KiB buffer its frame was
 * read into: sent as it is, every call would copy 64 KiB and hold it in the worker's queue. The copy is
 * `new Uint8Array(bytes)`: on a Node Buffer (what grpc-js decodes from), `slice()` is another view.
 */
export function ownBytes(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? bytes
    : new Uint8Array(bytes);
}

/** A request without its id (distributes over the request kinds). */
type Unnumbered<T> = T extends unknown ? Omit<T, 'id'> : never;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

/** One worker thread and its calls in flight. */
class CaThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(
    private readonly url: URL,
    private readonly pkiDir: string,
  ) {}

  call(request: Unnumbered<CaWorkerRequest>): Promise<unknown> {
    const worker = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ ...request, id } as CaWorkerRequest);
    });
  }

  async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll('the certificate authority was closed');
    if (worker !== undefined) await worker.terminate();
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(this.url, { workerData: { pkiDir: this.pkiDir } });
    // The worker never keeps the process alive on its own.
    worker.unref();
    worker.on('message', (res: CaWorkerResponse) => {
      const p = this.pending.get(res.id);
      if (p === undefined) return;
      this.pending.delete(res.id);
      if (res.ok) p.resolve(res.value);
      else p.reject(new ConfbootError(res.code as ConfbootErrorCode, res.message));
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(why);
    };
    worker.on('error', (err) => lost(`the CA worker failed: ${err.message}`));
    worker.on('exit', (code) => lost(`the CA worker exited with code ${code}`));
    this.worker = worker;
    return worker;
  }

  private failAll(why: string): void {
    for (const p of this.pending.values()) p.reject(new ConfbootError('internal', why));
    this.pending.clear();
  }
}

/** {@link CertificateAuthority} whose CSR work runs on worker threads. */
export class WorkerCertificateAuthority implements CertificateAuthority {
  private readonly clock: Clock;
  private readonly local: FileCertificateAuthority;
  private readonly threads: CaThread[];
  /** Whether the CSR work runs on worker threads (false: the worker entry file is missing). */
  readonly onWorkers: boolean;

  /** Throws `invalid-argument` for a worker count that is not an integer ≥ 1. */
  constructor(options: WorkerCertificateAuthorityOptions) {
    const count = options.workers ?? 1;
    if (!Number.isInteger(count) || count < 1)
      throw new ConfbootError('invalid-argument', `CA workers must be an integer ≥ 1, got ${count}`);
    const pkiDir = options.pkiDir ?? DEFAULT_PKI_DIR;
    this.clock = options.clock;
    this.local = new FileCertificateAuthority({ clock: options.clock, pkiDir });
    const url = options.workerUrl ?? new URL('./ca-worker.js', import.meta.url);
    this.onWorkers = url.protocol !== 'file:' || existsSync(fileURLToPath(url));
    this.threads = this.onWorkers ? Array.from({ length: count }, () => new CaThread(url, pkiDir)) : [];
  }

  /** Parses a DER CSR and checks its self-signature on a worker. */
  async inspectCsr(csrDer: Uint8Array): Promise<CsrInfo> {
    if (!this.onWorkers) return this.local.inspectCsr(csrDer);
    return (await this.threadFor(csrDer).call({ op: 'inspect', der: ownBytes(csrDer) })) as CsrInfo;
  }

  /** Signs a kubelet CSR on a worker, valid from this thread's clock time. */
  async signKubeletCsr(csrDer: Uint8Array, identity: KubeletIdentity): Promise<Uint8Array> {
    if (!this.onWorkers) return this.local.signKubeletCsr(csrDer, identity);
    const nowMs = this.clock.now().getTime();
    const plain = { nodeName: identity.nodeName, ipAddresses: [...identity.ipAddresses] };
    return (await this.threadFor(csrDer).call({
      op: 'sign',
      der: ownBytes(csrDer),
      identity: plain,
      nowMs,
    })) as Uint8Array;
  }

  /** The eight control-plane files, read on this thread. */
  controlPlaneFiles(): Promise<ControlPlaneFile[]> {
    return this.local.controlPlaneFiles();
  }

  /** Stops the workers; calls in flight fail with `internal`. */
  async close(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.stop()));
  }

  /** The same CSR bytes always reach the same worker (its parse memo). */
  private threadFor(csrDer: Uint8Array): CaThread {
    const last = csrDer.length > 0 ? (csrDer[csrDer.length - 1] as number) : 0;
    return this.threads[last % this.threads.length] as CaThread;
  }
}
