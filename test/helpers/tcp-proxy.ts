import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy the test controls: `cut()` drops every connection and refuses new ones until
 * `restore()`; `freeze()` keeps them open and forwards nothing more either way (a host that
 * hangs), until `thaw()` forwards again what waited meanwhile, in order.
 */
export interface TcpProxy {
  port: number;
  cut(): Promise<void>;
  freeze(): void;
  thaw(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  let server: Server | undefined;
  let port = 0;
  const open = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(targetPort, targetHost);
        sockets.add(client).add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream).pipe(client);
        pairs.add([client, upstream]);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        const address = s.address();
        if (typeof address === 'object' && address) port = address.port;
        server = s;
        resolve();
      });
    });
  const shut = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      if (!server) return resolve();
      server.close(() => resolve());
      server = undefined;
    });
  await open();
  return {
    get port() {
      return port;
    },
    cut: shut,
    freeze() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    thaw() {
      for (const [client, upstream] of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
    },
    restore: open,
    close: shut,
  };
}
