import { connect, createServer, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a ClickHouse HTTP interface that the nemesis can stall:
 * while stalled it forwards no byte either way (new connections are accepted and held too),
 * as a ClickHouse that stops answering does — the runners' requests stay open, their lease
 * renewals wait, their statements' answers wait. When the stall ends, everything held is sent
 * on in order. It never makes up a byte: what passes is the server's own.
 *
 * Plain TCP: for an `https://` server it would present the server's certificate under
 * 127.0.0.1, so `verify-coordination` refuses `stall` there.
 */
export interface StallProxy {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Holds all traffic for `ms`; a stall during a stall extends it. */
  stall(ms: number): void;
  stalled(): boolean;
  close(): Promise<void>;
}

interface Pipe {
  readonly from: Socket;
  readonly to: Socket;
  readonly held: Buffer[];
}

export async function startStallProxy(target: URL): Promise<StallProxy> {
  const host = target.hostname;
  const port = Number(target.port || 80);
  const sockets = new Set<Socket>();
  const pipes: Pipe[] = [];
  let stalledUntilMs = 0;
  let timer: NodeJS.Timeout | undefined;
  const isStalled = () => Date.now() < stalledUntilMs;

  const flush = () => {
    for (const p of pipes) {
      for (const chunk of p.held.splice(0)) if (!p.to.destroyed) p.to.write(chunk);
    }
  };
  const forward = (from: Socket, to: Socket) => {
    const pipe: Pipe = { from, to, held: [] };
    pipes.push(pipe);
    from.on('data', (chunk: Buffer) => {
      if (isStalled() || pipe.held.length > 0) pipe.held.push(chunk);
      else if (!to.destroyed) to.write(chunk);
    });
    from.on('end', () => {
      // Half-close only after what is held went out.
      const done = () => (pipe.held.length === 0 ? to.end() : setTimeout(done, 50));
      done();
    });
    const drop = () => {
      to.destroy();
      const i = pipes.indexOf(pipe);
      if (i >= 0) pipes.splice(i, 1);
    };
    from.on('error', drop);
    from.on('close', drop);
  };

  const server = createServer((client) => {
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.setNoDelay(true);
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const listenPort = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${listenPort}`,
    stall(ms) {
      stalledUntilMs = Math.max(stalledUntilMs, Date.now() + ms);
      clearTimeout(timer);
      timer = setTimeout(flush, stalledUntilMs - Date.now());
    },
    stalled: isStalled,
    async close() {
      clearTimeout(timer);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
