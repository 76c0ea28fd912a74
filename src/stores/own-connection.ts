import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { IoredisLikeClient } from './redis-client.js';

/**
 * What a store's own connection changes of the client's options, so that
 * ioredis never sends a script call twice. When a connection drops after
 * Redis ran a command but before its reply came, ioredis by default sends the
 * command again once it reconnects (`autoResendUnfulfilledCommands`), and a
 * Cluster does so after `retryDelayOnFailover`: a script applied twice takes
 * twice or gives back twice. Here such a command fails instead (it may have
 * run); a command not written yet still waits for the connection, and a
 * Cluster still follows MOVED, ASK, TRYAGAIN and CLUSTERDOWN (Redis ran
 * nothing then).
 */
const NEVER_RESEND: Partial<RedisOptions> = {
  autoResendUnfulfilledCommands: false,
  // fails the commands written to a connection that closed, rather than keeping them for the next
  maxRetriesPerRequest: 0,
  // a reconnect on an error reply would send the failed command again
  reconnectOnError: null,
};

/**
 * What it changes so that the store reads every reply as ioredis types it by
 * default (integers as numbers), whatever the client's options: with the
 * client's `stringNumbers`, every script's reply came back as strings, and
 * each call failed after Redis had applied it. (On node-redis the store asks
 * for the default reply types per call: redis-client.ts.)
 */
const DEFAULT_REPLIES: Partial<RedisOptions> = {
  stringNumbers: false,
};

/**
 * What it changes so that Redis runs the store's calls in the order it makes
 * them: a client's `enableAutoPipelining` holds a command for a later turn,
 * and on a Cluster the calls the store sends on a master's own connection
 * (calls shared per master) are not held: a reset held so ran after the
 * acquires made after it, and took back what they took. (The store shares
 * calls itself.)
 */
const IN_ORDER: Partial<RedisOptions> = {
  enableAutoPipelining: false,
};

/** Every option the store's own connection sets, over the client's. */
const OWN_OPTIONS: Partial<RedisOptions> = { ...NEVER_RESEND, ...DEFAULT_REPLIES, ...IN_ORDER };

/**
 * A connection of the store's own, with the client's options (address,
 * credentials, TLS, `natMap`, timeouts) but `NEVER_RESEND` and
 * `DEFAULT_REPLIES`, and the client's database as it is now: it follows
 * every `SELECT` of the client, in order with the store's calls. It closes
 * when the client ends (`quit`, `disconnect`), so it keeps no process alive
 * that the client would not, and it is opened again should the client
 * reconnect. It does not carry what else a client changes on its own
 * connection at run time (`CLIENT SETNAME`, `CLIENT TRACKING`, an `AUTH` sent
 * by hand): it is opened, and reconnects, from the client's options as they
 * are then (credentials rotated in them included).
 */
export class OwnConnection {
  #own: Redis | Cluster | undefined;
  /** While the connection opens with the offline queue off: the writes waiting for it, in the order asked. */
  #waiting: Waiting[] | undefined;
  /** Fails the calls in ioredis's offline queue of the connection, on close (it may never fail them itself). */
  readonly #queued = new Set<() => void>();
  #watching = false;
  /** The store's operations begun and not settled (`hold`). */
  #outstanding = 0;
  /** Set when the client ended with operations outstanding: the connection closes once they settle. */
  #ending = false;
  /** Typed as ioredis's: iovalkey's `Redis` and `Cluster` have the same methods and options. */
  readonly client: Redis | Cluster;

  constructor(client: IoredisLikeClient) {
    this.client = client as unknown as Redis | Cluster;
  }

  /** The connection, while open (it may still be connecting). */
  get current(): Redis | Cluster | undefined {
    return this.#own;
  }

  /** Closes with the client: one listener per client, however many stores share it (held weakly). */
  #watch(): void {
    if (this.#watching) return;
    this.#watching = true;
    let owners = ownersOf.get(this.client)?.set;
    if (owners === undefined) {
      const set = new Set<WeakRef<OwnConnection>>();
      const client = this.client;
      const closeAll = (): void => {
        for (const ref of set) ref.deref()?.close();
      };
      const closeIfDisconnected = (): void => void (disconnected(client) && closeAll());
      ownersOf.set(client, { set, closeIfDisconnected });
      // the client ended (a quit() lets its calls finish): so do the store's, then its connection closes
      client.on('end', () => {
        for (const ref of set) {
          const owner = ref.deref();
          if (owner !== undefined) owner.#end();
        }
      });
      // ioredis emits 'select' as it sends a SELECT: the store's calls after it go to that database too
      client.on('select', (db: unknown) => {
        if (typeof db !== 'number') return;
        for (const ref of set) {
          const owner = ref.deref();
          if (owner !== undefined) owner.#select(db);
        }
      });
      // A client disconnected while it waits to reconnect emits no 'end' (see `disconnected`). So the store's
      // connections close when, after a client's 'disconnecting' (a Cluster), once the reconnect wait a
      // client announced is over (a timer that keeps no process alive), or when one of them is about to
      // reconnect (`#openNow`), the client turns out to have been disconnected.
      client.on('disconnecting', closeIfDisconnected);
      client.on('reconnecting', (delay: unknown) => {
        const check = setTimeout(closeIfDisconnected, (typeof delay === 'number' ? delay : 0) + 1);
        check.unref();
      });
      owners = set;
    }
    for (const ref of owners) if (ref.deref() === undefined) owners.delete(ref);
    owners.add(new WeakRef(this));
  }

  /**
   * Opens the connection now (it connects as the client does: at once, or on
   * first use with `lazyConnect`), so that the first call does not wait for
   * the handshake. A client that has ended opens it on first use, if ever.
   */
  open(): void {
    if (this.#own === undefined && !disconnected(this.client)) this.#openNow();
  }

  /**
   * Runs `write` with the connection, opened on first use; once it has been
   * ready, a command sent while it is down fails as the client's would.
   * Writes go out in the order asked, whatever waits: at once on an open
   * connection (ioredis queues a command written while it connects), or,
   * while one opens with the offline queue off, all together once it is
   * ready. Redis then runs the store's calls in the order it made them.
   */
  use<T>(write: (own: Redis | Cluster) => Promise<T>): Promise<T> {
    if (this.#own === undefined) {
      if (disconnected(this.client)) return Promise.reject(new Error('Connection is closed.'));
      this.#openNow();
    }
    const waiting = this.#waiting;
    if (waiting === undefined) {
      const own = this.#own!;
      if (own.status === 'ready') return write(own);
      // as the client's would, with its offline queue off (the store's Cluster keeps its own on: see `open`)
      if (this.client.options.enableOfflineQueue === false) return Promise.reject(new Error('Connection is closed.'));
      return this.#untilClosed(write(own));
    }
    return new Promise<T>((resolve, reject) => {
      waiting.push((own, error) => (error === undefined ? write(own).then(resolve, reject) : reject(error instanceof Error ? error : new Error(String(error)))));
    });
  }

  /**
   * `reply`, or a failure on close: a connection closed while it waits to
   * reconnect emits no 'end' and leaves its offline queue unanswered.
   */
  #untilClosed<T>(reply: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const fail = (): void => reject(new Error('Connection is closed.'));
      this.#queued.add(fail);
      reply.then(resolve, reject).finally(() => this.#queued.delete(fail)).catch(() => undefined);
    });
  }

  #openNow(): void {
    const own = open(this.client);
    this.#own = own;
    // Connection errors fail the commands; the client reports the same errors to the application.
    own.on('error', () => undefined);
    this.#watch();
    own.once('end', () => {
      if (this.#own === own) this.#own = undefined;
    });
    own.on('reconnecting', () => {
      // It reconnects as the client would now: credentials rotated in the client's options reach it too.
      if (!isCluster(own) && !isCluster(this.client)) reopenWith(this.client, own);
      // a store made while its client waits to reconnect saw no 'reconnecting' of it
      ownersOf.get(this.client)?.closeIfDisconnected();
    });
    // With the offline queue off (as the README advises), a command before the first 'ready' would fail.
    if (this.client.options.enableOfflineQueue !== false) return;
    const waiting: Waiting[] = [];
    this.#waiting = waiting;
    const release = (error?: unknown): void => {
      if (this.#waiting === waiting) this.#waiting = undefined;
      for (const go of waiting.splice(0)) go(own, error);
    };
    whenReady(own).then(() => release(), release);
    // `lazyConnect` connects on a command's write, which waits for 'ready' here: connect it now.
    if (own.status === 'wait') own.connect().catch(() => undefined);
  }

  /**
   * Runs `call`, one of the store's operations (its script calls, in turn or at once), counted as
   * outstanding until it settles. Refused, as the client's own command would be, once the client's
   * `quit()` or `disconnect()` has begun; one begun before finishes on the connection.
   */
  async hold<T>(call: () => Promise<T>): Promise<T> {
    if (closing(this.client)) throw new Error('Connection is closed.');
    this.#outstanding += 1;
    try {
      return await call();
    } finally {
      this.#outstanding -= 1;
      if (this.#ending && this.#outstanding === 0) this.close();
    }
  }

  /**
   * The client ended: the connection closes once every operation outstanding has settled (they finish
   * as the client's own did), at once when none is. Should it lose its socket meanwhile, it closes then
   * (`'reconnecting'` finds the client disconnected).
   */
  #end(): void {
    if (this.#own !== undefined && this.#outstanding > 0) this.#ending = true;
    else this.close();
  }

  /** Switches the connection, if open, to the client's database `db`, after the writes asked before. */
  #select(db: number): void {
    if (this.#own === undefined || isCluster(this.#own)) return;
    this.use((own) => (own as Redis).select(db)).catch(() => undefined);
  }

  close(): void {
    const own = this.#own;
    const waiting = this.#waiting;
    this.#ending = false;
    this.#own = undefined;
    this.#waiting = undefined;
    own?.disconnect();
    // writes still waiting for it fail now (a connection closed while it waits to reconnect may never end)
    for (const go of waiting?.splice(0) ?? []) go(own!, new Error('Connection is closed.'));
    for (const fail of [...this.#queued]) fail();
    this.#queued.clear();
  }
}

/** A write waiting for the connection to be ready: run with it, or failed with the error it closed with. */
type Waiting = (own: Redis | Cluster, error?: unknown) => void;

/** Per client: the store connections that close with it (held weakly), and what closes them once it has been disconnected. */
const ownersOf = new WeakMap<object, { set: Set<WeakRef<OwnConnection>>; closeIfDisconnected: () => void }>();

function open(client: Redis | Cluster): Redis | Cluster {
  if (isCluster(client)) {
    const options = {
      retryDelayOnFailover: 0,
      ...IN_ORDER,
      // ioredis's Cluster is ready before its node connections are open (each opens on its first
      // command), and with its offline queue off it fails a command bound for a node whose connection
      // is still opening. Node connections keep an offline queue of their own (ioredis turns it on),
      // which NEVER_RESEND fails when they close; `use` fails a call while the Cluster itself is down.
      enableOfflineQueue: true,
      // With the client's offline queue off, the Cluster's own queue holds no call for an outage:
      // ioredis retries a CLUSTERDOWN or TRYAGAIN reply later by itself, and a retry that finds no node
      // would wait there until Redis came back. So this Cluster never reconnects: when its last node
      // connection closes it ends, failing what its queue holds, and the next call opens another.
      ...(client.options.enableOfflineQueue === false ? { clusterRetryStrategy: () => null } : {}),
      redisOptions: { ...client.options.redisOptions, ...OWN_OPTIONS },
    } as Parameters<Cluster['duplicate']>[1];
    return client.duplicate([], options);
  }
  return client.duplicate({ ...OWN_OPTIONS, db: selected(client) });
}

/**
 * Makes `own` connect next with the client's options as they are now (its
 * address, credentials, TLS), on the client's database now, with the store's
 * own settings over them: ioredis reads a connection's options each time it
 * connects, and an application rotates credentials by setting the client's.
 */
function reopenWith(client: Redis, own: Redis): void {
  Object.assign(own.options, client.options, OWN_OPTIONS, { db: selected(client) });
}

/** The database the client uses now: the last it was told to SELECT (ioredis keeps it, privately), else its option. */
function selected(client: Redis): number {
  const db = (client as unknown as { condition?: { select?: unknown } }).condition?.select;
  return typeof db === 'number' ? db : (client.options.db ?? 0);
}

/**
 * Whether the client has been closed for good: ended, or disconnected (`quit`,
 * `disconnect`) while it waited to reconnect, where ioredis leaves it waiting
 * for ever and emits nothing.
 */
function disconnected(client: Redis | Cluster): boolean {
  if (client.status === 'end') return true;
  const closing = (client as unknown as { manuallyClosing?: unknown }).manuallyClosing === true;
  if (!closing) return false;
  // A Redis stays 'reconnecting'. A Cluster stays 'disconnecting' when it had no node connection left to
  // close; one that has (a quit() while ready, letting its calls finish) ends by itself.
  return client.status === 'reconnecting' || (client.status === 'disconnecting' && isCluster(client) && client.nodes('all').length === 0);
}

/** Whether the client was told to close (`quit`, `disconnect`) and has not connected again since, or has ended. */
function closing(client: Redis | Cluster): boolean {
  return client.status === 'end' || (client as unknown as { manuallyClosing?: unknown }).manuallyClosing === true;
}

function isCluster(client: Redis | Cluster): client is Cluster {
  return client.isCluster;
}

/**
 * Resolves when `own` is ready; rejects with the first error, close or end
 * before then (a connection hung up on fails its waiting calls at once, as
 * a disconnected one with the offline queue off does).
 */
function whenReady(own: Redis | Cluster): Promise<void> {
  if (own.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const settle = (error?: unknown): void => {
      own.off('ready', onReady);
      own.off('error', onError);
      own.off('close', onEnd);
      own.off('end', onEnd);
      if (error === undefined) resolve();
      else reject(error instanceof Error ? error : new Error(String(error)));
    };
    const onReady = (): void => settle();
    const onError = (error: unknown): void => settle(error);
    const onEnd = (): void => settle(new Error('Connection is closed.'));
    own.once('ready', onReady);
    own.once('error', onError);
    own.once('close', onEnd);
    own.once('end', onEnd);
  });
}
