import { connect, type ClientHttp2Session } from 'node:http2';
import { parentPort, workerData } from 'node:worker_threads';
import { credentials, loadPackageDefinition, type Client, type ClientReadableStream, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { protoPath } from '../src/shim/grpc/proto.js';

/**
 * The gRPC side of the bench, off the shim's event loop: in a worker thread,
 * `load` keeps `concurrency` GetMetrics calls in flight for `seconds` and
 * reports the calls/s; in a child process, `streams` opens `count` StreamIsActive
 * streams over `channels` channels, reports once each has its first message,
 * and holds them until killed. Loopback only.
 */
export interface LoadJob {
  readonly kind: 'load';
  /**
   * `wire`: Node's http2 client speaking gRPC's framing (the request serialised by the
   * proto's own serialiser, grpc-status checked, the answer decoded): a lean generator, as
   * autocannon is for HTTP. `grpc-js`: the full @grpc/grpc-js client, which here caps at a
   * few hundred calls/s whatever the server does, so it would measure the client.
   */
  readonly client: 'wire' | 'grpc-js';
  readonly address: string;
  readonly metadata: Record<string, string>;
  readonly concurrency: number;
  readonly seconds: number;
}

type Unary = (request: unknown, callback: (err: Error | null, value: unknown) => void) => void;

function loopbackOnly(address: string): string {
  if (!/^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(address)) throw new Error(`bench targets loopback only, not ${address}`);
  return address;
}

function makeClient(address: string): Client & Record<string, Unary> {
  const Ctor = service();
  return new Ctor(loopbackOnly(address), credentials.createInsecure()) as Client & Record<string, Unary>;
}

type Result = { calls: number; errors: number; rps: number };

/** Calls `call` with `concurrency` in flight for `seconds` after a warm-up. */
async function drive(concurrency: number, seconds: number, call: () => Promise<boolean>): Promise<Result> {
  for (let i = 0; i < 200; i++) await call();
  let calls = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end) {
      if (await call()) calls += 1;
      else errors += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { calls, errors, rps: calls / ((performance.now() - started) / 1000) };
}

function service(): ServiceClientConstructor {
  const pkg = loadPackageDefinition(loadSync(protoPath(), { keepCase: true, longs: Number, defaults: true }));
  return (pkg.externalscaler as GrpcObject).ExternalScaler as ServiceClientConstructor;
}

/** GetMetrics over one HTTP/2 connection in gRPC framing; a call counts when grpc-status is 0 and the value decodes. */
async function wireLoad(job: LoadJob): Promise<Result> {
  const method = service().service.GetMetrics!;
  const message = method.requestSerialize({ scaledObjectRef: { name: 'bench', namespace: 'bench', scalerMetadata: job.metadata }, metricName: 'm' });
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  const session: ClientHttp2Session = connect(`http://${loopbackOnly(job.address)}`);
  const headers = { ':method': 'POST', ':path': method.path, 'content-type': 'application/grpc', te: 'trailers' };
  const call = () =>
    new Promise<boolean>((resolve) => {
      const req = session.request(headers);
      const chunks: Buffer[] = [];
      let ok = false;
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('trailers', (trailers) => (ok = trailers['grpc-status'] === '0'));
      req.on('error', () => resolve(false));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const answer = ok && body.length > 5 ? (method.responseDeserialize(body.subarray(5)) as { metricValues: unknown[] }) : undefined;
        resolve(answer !== undefined && answer.metricValues.length === 1);
      });
      req.end(frame);
    });
  try {
    return await drive(job.concurrency, job.seconds, call);
  } finally {
    session.close();
  }
}

async function grpcJsLoad(job: LoadJob): Promise<Result> {
  const client = makeClient(job.address);
  const request = { scaledObjectRef: { name: 'bench', namespace: 'bench', scalerMetadata: job.metadata }, metricName: 'm' };
  try {
    return await drive(job.concurrency, job.seconds, () => new Promise<boolean>((resolve) => (client.GetMetrics as Unary).call(client, request, (err) => resolve(err === null))));
  } finally {
    client.close();
  }
}

function holdStreams(address: string, count: number, channels: number, keys: number): void {
  const clients = Array.from({ length: channels }, () => makeClient(address));
  let first = 0;
  const held: ClientReadableStream<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const client = clients[i % channels]!;
    const ref = { name: `so-${i}`, namespace: 'bench', scalerMetadata: { query: 'keyed', key: `k${i % keys}` } };
    const stream = (client.StreamIsActive as unknown as (r: unknown) => ClientReadableStream<unknown>).call(client, ref);
    let seen = false;
    stream.on('data', () => {
      if (!seen) {
        seen = true;
        first += 1;
        if (first === count) process.stdout.write('open\n');
      }
    });
    stream.on('error', () => undefined);
    held.push(stream);
  }
}

if (parentPort !== null && (workerData as LoadJob | undefined)?.kind === 'load') {
  const job = workerData as LoadJob;
  parentPort.postMessage(await (job.client === 'wire' ? wireLoad(job) : grpcJsLoad(job)));
} else if (process.argv[2] === 'streams') {
  const [address = '', count = '0', channels = '1', keys = '1'] = process.argv.slice(3);
  holdStreams(address, Number(count), Number(channels), Number(keys));
}
