import { once } from 'node:events';
import { createServer, type IncomingMessage, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of a service that the test controls: it records the path of every
 * request, and while `cut` answers 503 to every request (or to those whose path starts with
 * the prefix given), cutting the requests under way too.
 */
export interface HttpProxy {
  url: string;
  /** Paths with query of the requests received so far (answered 503 or not), in order. */
  readonly paths: string[];
  cut(prefix?: string): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startHttpProxy(target: string): Promise<HttpProxy> {
  const upstream = new URL(target);
  const paths: string[] = [];
  const underWay = new Set<IncomingMessage>();
  let blocked: string | undefined;
  const server = createServer((req, res) => {
    paths.push(req.url ?? '');
    if (blocked !== undefined && (req.url ?? '').startsWith(blocked)) {
      res.writeHead(503).end();
      return;
    }
    const forwarded = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        underWay.add(answer);
        answer.on('close', () => underWay.delete(answer));
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
    res.on('close', () => forwarded.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    paths,
    cut(prefix = '') {
      blocked = prefix;
      server.closeAllConnections();
      for (const answer of underWay) answer.destroy();
    },
    restore() {
      blocked = undefined;
    },
    async close() {
      blocked = '';
      server.closeAllConnections();
      const closed = once(server, 'close');
      server.close();
      await closed;
    },
  };
}
