import type { Server, ServerOptions } from 'node:http';

/**
 * Options of an HTTP server that cuts slow clients: the request headers (an upgrade request
 * included) must arrive whole within `headersMs`, the whole request within `requestMs`. Node
 * checks both every tenth of the shorter one, at least every 50 ms and at most every 30 s.
 */
export function slowClientLimits(headersMs: number, requestMs: number): ServerOptions {
  return {
    headersTimeout: headersMs,
    requestTimeout: requestMs,
    connectionsCheckingInterval: Math.max(50, Math.min(headersMs, 30_000) / 10),
  };
}

/** A port that cannot be opened: exit 2 with a line naming it and what to change. */
export class ListenError extends Error {
  constructor(
    readonly port: number,
    readonly setting: string,
    readonly code: string,
  ) {
    super(
      code === 'EADDRINUSE'
        ? `port ${port} is already in use; stop the other program or set ${setting} to a free port`
        : code === 'EACCES'
          ? `port ${port} needs privileges here; set ${setting} to a port above 1023`
          : `cannot listen on port ${port} (${code}); check ${setting} and BIND`,
    );
    this.name = 'ListenError';
  }
}

/** Listens and resolves with the bound port; rejects with ListenError. */
export function listen(
  server: Server,
  port: number,
  host: string,
  setting: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(new ListenError(port, setting, err.code ?? 'error'));
    };
    const onListening = () => {
      server.off('error', onError);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/** How long open requests may finish after close before their connections are cut. */
const closeGraceMs = 2_000;

/** Closes a server, ending idle keep-alive sockets so close does not wait for them. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    server.close(() => resolve());
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), closeGraceMs).unref();
  });
}
