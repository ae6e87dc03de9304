/**
 * The key service's `GetDataKeys` calls (adapter layer, src/adapters/kms): many GetDataKey requests
 * on one long-lived bidirectional call, each answered with the id it came with. A unary call costs a
 * grpc-js client about 180 µs of CPU (call stack, metadata, deadline timer, an HTTP/2 stream); a
 * message on an open call about 50 µs (measured on loopback, one at a time). The join service asks
 * for one key per join, so the saving is per join.
 *
 * Each request is checked and derived as GetDataKey does; a refused or failed one is answered with
 * the status code and message GetDataKey would have failed with, and the call goes on. At most
 * {@link MAX_IN_FLIGHT} requests of one call are derived at once, and reading stops while the answers
 * wait to be sent (HTTP/2 flow control then holds the client back). On shutdown every open call
 * stops reading, answers what it has started and ends with OK.
 */
import { type ServerDuplexStream, status } from '@grpc/grpc-js';
import type { DataKeysRequest, DataKeysResponse } from '../../gen/keyservice.js';
import { messageOf } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { Logger } from '../../ports/logger.js';
import { answerDataKeyRequest } from './data-key-answer.js';

/** Requests of one call derived at once; further requests wait unread. */
export const MAX_IN_FLIGHT = 64;

type Call = ServerDuplexStream<DataKeysRequest, DataKeysResponse>;

/** Serves `GetDataKeys` calls over `kms` and ends them on {@link DataKeyStreams.close}. */
export class DataKeyStreams {
  readonly #open = new Set<() => void>();
  #closing = false;

  constructor(
    private readonly kms: KMS,
    private readonly logger: Logger,
  ) {}

  /** The `getDataKeys` handler. */
  readonly handle = (call: Call): void => {
    const log = this.logger.child({ peer: call.getPeer() });
    let inFlight = 0;
    let waitingDrain = false;
    let inputEnded = false;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      this.#open.delete(flow);
      call.end();
    };
    const flow = () => {
      if (finished) return;
      if ((inputEnded || this.#closing) && inFlight === 0 && !waitingDrain) {
        finish();
        return;
      }
      if (this.#closing || inFlight >= MAX_IN_FLIGHT || waitingDrain) call.pause();
      else call.resume();
    };
    const answer = (res: DataKeysResponse) => {
      inFlight--;
      // Answers that find the buffer full wait for the same 'drain': one listener, not one each.
      if (!finished && !call.cancelled && !call.write(res) && !waitingDrain) {
        waitingDrain = true;
        call.once('drain', () => {
          waitingDrain = false;
          flow();
        });
      }
      flow();
    };
    call.on('data', (req: DataKeysRequest) => {
      inFlight++;
      flow();
      this.#derive(req, log)
        .then(answer)
        .catch((err: unknown) =>
          log.error('Answering a data key request failed', { reason: messageOf(err) }),
        );
    });
    call.on('end', () => {
      inputEnded = true;
      flow();
    });
    const gone = () => {
      finished = true;
      this.#open.delete(flow);
    };
    call.on('cancelled', gone);
    call.on('error', gone);
    this.#open.add(flow);
    flow();
  };

  /** Stops reading every open call; each ends with OK once its started requests are answered. */
  close(): void {
    this.#closing = true;
    for (const flow of [...this.#open]) flow();
  }

  /** One request's answer; never rejects. */
  async #derive(req: DataKeysRequest, log: Logger): Promise<DataKeysResponse> {
    const { id } = req;
    const answer = await answerDataKeyRequest(this.kms, log, req.dataKeyId, req.length);
    if ('key' in answer) return { id, dataKey: Buffer.from(answer.key), code: status.OK, message: '' };
    return { id, dataKey: Buffer.alloc(0), code: answer.refusal.code, message: answer.refusal.details };
  }
}
