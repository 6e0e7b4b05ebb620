import { createServer, type Server, type ServerOptions } from 'node:http';

export interface StatusSource {
  /** False while the buffer database is unusable. */
  healthy(): boolean;
  rooms(): number;
  connections(): number;
  /** Prometheus text. */
  metrics(): string;
  /** More fields of `/health` (a cluster node's state). */
  extra?(): Record<string, unknown>;
}

function json(status: number, body: object): [number, Record<string, string>, string] {
  return [status, { 'content-type': 'application/json; charset=utf-8' }, JSON.stringify(body)];
}

/**
 * The status port: `GET /health` (200 with room and connection counts, 503 while the buffer
 * database is unusable) and `GET /metrics` (Prometheus text). No authentication: bind it to a
 * private address when the relay is public.
 */
export function createStatusServer(source: StatusSource, options: ServerOptions = {}): Server {
  return createServer(options, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    let reply: [number, Record<string, string>, string];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      reply = json(405, { error: { code: 'method_not_allowed', message: 'use GET' } });
    } else if (path === '/health') {
      reply = source.healthy()
        ? json(200, {
            status: 'ok',
            rooms: source.rooms(),
            connections: source.connections(),
            ...source.extra?.(),
          })
        : json(503, { status: 'unavailable' });
    } else if (path === '/metrics') {
      reply = [
        200,
        { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
        source.metrics(),
      ];
    } else {
      reply = json(404, { error: { code: 'not_found', message: 'try /health or /metrics' } });
    }
    const [status, headers, body] = reply;
    res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
}
