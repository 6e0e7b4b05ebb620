import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * Connections a test opens and leaves unfinished (a slowloris), each remembering whether the
 * server closed it and what it answered. `closeAll` cuts them all.
 */
export function slowConnections() {
  const sockets: Array<Socket & { answer: string; ended: boolean }> = [];
  return {
    sockets,
    /** Connects from `localAddress` and writes `head` (an unfinished request). */
    async open(port: number, localAddress: string, head: string) {
      const socket = Object.assign(connect({ port, host: '127.0.0.1', localAddress }), {
        answer: '',
        ended: false,
      });
      sockets.push(socket);
      socket.on('error', () => {});
      socket.on('data', (chunk: Buffer) => {
        socket.answer += chunk.toString('latin1');
      });
      socket.on('close', () => {
        socket.ended = true;
      });
      await once(socket, 'connect');
      socket.write(head);
      return socket;
    },
    /** The sockets the server has not closed. */
    stillOpen: () => sockets.filter((s) => !s.ended),
    closeAll() {
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** A GET from `localAddress` (a loopback address other than the test's): status and body. */
export function getFrom(
  url: string,
  localAddress: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
