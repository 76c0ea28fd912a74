// A TCP proxy between a client and a Redis server that loses replies on
// command: it can hold the replies Redis sends back (the commands have run),
// let them through, or cut every connection with them still held, as a
// network that drops a connection after Redis answered would. Nothing is
// reordered. A Cluster is reached through one proxy per node and ioredis
// `natMap` (see `clusterNatMap`).
import { Socket, createServer } from 'node:net';
import type { Server } from 'node:net';

export interface FaultProxy {
  readonly host: string;
  readonly port: number;
  /** `redis://host:port` of the proxy. */
  readonly url: string;
  /** From now on replies are held back (the commands still reach Redis and run). */
  hold(): void;
  /** Resolves once at least `bytes` bytes of replies are held (default 1): Redis has answered. */
  held(bytes?: number): Promise<void>;
  /** Bytes of replies held now. */
  readonly heldBytes: number;
  /** Sends the held replies on, in order, and lets replies through again. */
  release(): void;
  /** Cuts every connection, the held replies lost; new connections then pass replies again. */
  dropHeld(): void;
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  server: Socket;
  held: Buffer[];
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const links = new Set<Link>();
  let holding = false;
  let heldBytes = 0;
  let accepted = 0;
  let waiters: { bytes: number; resolve: () => void }[] = [];

  const wake = (): void => {
    waiters = waiters.filter((w) => {
      if (heldBytes < w.bytes) return true;
      w.resolve();
      return false;
    });
  };

  const server: Server = createServer((client) => {
    accepted += 1;
    const upstream = new Socket();
    const link: Link = { client, server: upstream, held: [] };
    links.add(link);
    const cut = (): void => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    upstream.connect(target.port, target.host);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (holding) {
        link.held.push(chunk);
        heldBytes += chunk.length;
        wake();
      } else {
        client.write(chunk);
      }
    });
    client.on('error', cut);
    upstream.on('error', cut);
    client.on('close', cut);
    upstream.on('close', cut);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fault proxy: no port');
  const port = address.port;

  return {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    get connections() {
      return accepted;
    },
    get heldBytes() {
      return heldBytes;
    },
    hold() {
      holding = true;
    },
    held(bytes = 1) {
      if (heldBytes >= bytes) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ bytes, resolve }));
    },
    release() {
      holding = false;
      heldBytes = 0;
      for (const link of links) {
        for (const chunk of link.held) link.client.write(chunk);
        link.held = [];
      }
    },
    dropHeld() {
      holding = false;
      heldBytes = 0;
      for (const link of [...links]) {
        link.held = [];
        links.delete(link);
        link.client.destroy();
        link.server.destroy();
      }
    },
    async close() {
      for (const link of links) {
        link.client.destroy();
        link.server.destroy();
      }
      links.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One proxy per node, and the ioredis `natMap` that sends a Cluster client through them. */
export async function clusterThroughProxies(
  nodes: readonly { host: string; port: number }[],
): Promise<{ proxies: FaultProxy[]; natMap: Record<string, { host: string; port: number }>; startup: { host: string; port: number }[] }> {
  const proxies = await Promise.all(nodes.map((node) => startFaultProxy(node)));
  const natMap: Record<string, { host: string; port: number }> = {};
  nodes.forEach((node, i) => {
    natMap[`${node.host}:${node.port}`] = { host: proxies[i]!.host, port: proxies[i]!.port };
  });
  return { proxies, natMap, startup: proxies.map((p) => ({ host: p.host, port: p.port })) };
}
