import { createServer, Socket } from 'node:net';
import type { Server } from 'node:net';

/**
 * A TCP proxy that holds back, on whichever connection sends it, every
 * command that names `marker` (until `release`): two connections of one pool
 * then reach Redis in the other order, as they may on any network.
 */
export async function requestHoldingProxy(target: { host: string; port: number }, marker: string) {
  let holding = false;
  const held: (() => void)[] = [];
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    upstream.connect(target.port, target.host);
    client.on('data', (chunk: Buffer) => {
      if (holding && chunk.includes(marker)) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const cut = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', cut);
      socket.on('close', cut);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    hold: () => (holding = true),
    /** Resolves once a command is held back. */
    held: async () => {
      while (held.length === 0) await new Promise((resolve) => setImmediate(resolve));
    },
    release: () => {
      holding = false;
      for (const send of held.splice(0)) send();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
