import { ServerResponse, type IncomingMessage } from 'node:http';

/**
 * A request in flight when close began came on a keep-alive socket that
 * Node's server.close() only reaps when idle: its answer must say
 * `connection: close`, or close would wait for the client to hang up.
 *
 * The app's server makes its responses from a class of its own, which is
 * Node's own until close begins: nothing runs per answer for this (an onSend
 * hook would, on every answer). `closeAfterAnswer` then gives the class a
 * writeHead that adds the header, so every answer written from then on ends
 * its socket. docs/performance.md
 */
export interface ClosingResponses {
  /** For the server's options (`http` / `https`: Node's `ServerResponse` option). */
  readonly ServerResponse: typeof ServerResponse;
  /** From now on, every answer closes its connection. */
  closeAfterAnswer(): void;
}

type WriteHead = ServerResponse['writeHead'];

export function closingResponses(): ClosingResponses {
  class ShimResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
    // Node makes each response with (req, options). Spelt out: the default constructor of a
    // subclass passes its arguments on by rest and spread, which costs on every answer.
    constructor(req: Request, options?: unknown) {
      // @ts-expect-error -- @types/node declares only `req`; Node's own server passes its options too.
      super(req, options);
    }
  }
  const plain: WriteHead = ServerResponse.prototype.writeHead;
  return {
    ServerResponse: ShimResponse,
    closeAfterAnswer() {
      ShimResponse.prototype.writeHead = function writeHead(this: ShimResponse, ...args: Parameters<WriteHead>) {
        if (!this.headersSent && !this.hasHeader('connection')) this.setHeader('connection', 'close');
        return plain.apply(this, args);
      } as WriteHead;
    },
  };
}
