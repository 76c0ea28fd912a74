import { createServer, Socket } from 'node:net';
import type { Server } from 'node:net';

/** A TCP relay to `target`: `link` joins each client's socket to its own upstream one, which either's error or close cuts. */
async function relay(target: { host: string; port: number }, link: (client: Socket, upstream: Socket) => void) {
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    upstream.connect(target.port, target.host);
    link(client, upstream);
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Resolves once `count()` is above 0. */
async function untilAny(count: () => number): Promise<void> {
  while (count() === 0) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * A TCP proxy that holds back, on whichever connection sends it, every
 * command that names `marker` (until `release`): two connections of one pool
 * then reach Redis in the other order, as they may on any network.
 */
export async function requestHoldingProxy(target: { host: string; port: number }, marker: string) {
  let holding = false;
  const held: (() => void)[] = [];
  const { url, close } = await relay(target, (client, upstream) => {
    client.on('data', (chunk: Buffer) => {
      if (holding && chunk.includes(marker)) held.push(() => upstream.write(chunk));
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
  });
  return {
    url,
    hold: () => (holding = true),
    /** Resolves once a command is held back. */
    held: () => untilAny(() => held.length),
    release: () => {
      holding = false;
      for (const send of held.splice(0)) send();
    },
    close,
  };
}

/**
 * A TCP proxy that holds back the replies on the connection that sends a
 * command naming `marker` (until `release`): Redis has run that command, and
 * a pool reads the reply of a command sent after it, on another of its
 * connections, first, as it may on any network.
 */
export async function replyHoldingProxy(target: { host: string; port: number }, marker: string) {
  let armed = false;
  let heldCount = 0;
  const releases: (() => void)[] = [];
  const { url, close } = await relay(target, (client, upstream) => {
    let holding = false;
    const held: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      if (armed && chunk.includes(marker)) {
        armed = false;
        holding = true;
        releases.push(() => {
          holding = false;
          for (const c of held.splice(0)) client.write(c);
        });
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (holding) {
        held.push(chunk);
        heldCount += 1;
      } else client.write(chunk);
    });
  });
  return {
    url,
    arm: () => (armed = true),
    /** Resolves once a reply is held back: Redis has run the command. */
    held: () => untilAny(() => heldCount),
    /** Sends the replies held, and holds no more. */
    release: () => {
      armed = false;
      for (const release of releases.splice(0)) release();
    },
    close,
  };
}
