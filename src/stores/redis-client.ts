// The Redis clients RedisStore runs its scripts through: ioredis and its fork
// iovalkey (`Redis`, `Cluster`), and node-redis 5 and 6 (`createClient`,
// `createCluster`). They are told apart by shape, never imported, so the
// package loads without any of them.
import type { Cluster, Redis } from 'ioredis';
import { clusterSlot } from './cluster-slot.js';
import { MAX_SHARED_KEYS } from './coalescer.js';
import { bySource } from './first-call.js';
import { OwnConnection } from './own-connection.js';

/** Keys per shared call on a single connection (ioredis, iovalkey, a node-redis client): see `ScriptClient.sharedKeys`. */
export const SHARED_KEYS_WRITTEN_AT_ONCE = 128;

/** An ioredis or iovalkey `Redis` or `Cluster`. */
export interface IoredisLikeClient {
  readonly isCluster: boolean;
  readonly status: string;
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
  /** The store runs its scripts on a duplicate of its own (own-connection.ts). */
  duplicate(...args: never[]): unknown;
}

/** Per-call options the store gives node-redis: its default reply types, whatever the client's own mapping. */
export interface NodeRedisCommandOptions {
  typeMapping?: object;
}

/** A node-redis 5 or 6 client (`createClient()`, or a pool from `createClientPool()`), connected by its owner. */
export interface NodeRedisClient {
  readonly isOpen: boolean;
  sendCommand(args: string[], options?: NodeRedisCommandOptions): Promise<unknown>;
  on(event: string, listener: () => void): unknown;
}

/** A node-redis cluster (`createCluster()`), connected by its owner. */
export interface NodeRedisCluster {
  readonly isOpen: boolean;
  readonly masters: readonly NodeRedisMaster[];
  /** Per hash slot, its shard; its master serves it. */
  readonly slots: readonly ({ readonly master: NodeRedisMaster } | undefined)[];
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[], options?: NodeRedisCommandOptions): Promise<unknown>;
}

/** A master of a node-redis cluster, and the client it keeps to it once connected. */
export interface NodeRedisMaster {
  readonly address: string;
  readonly client?: NodeRedisClient & { readonly isReady: boolean };
}

/** Every client `RedisStore` accepts. */
export type RedisStoreClient = IoredisLikeClient | NodeRedisClient | NodeRedisCluster;

/** A script as the clients run it: by hash, and by source when the node does not have it. */
export interface Script {
  readonly sha: string;
  readonly source: string;
  /** A shared call's script (lua/acquire-each.lua): a call of it may hold up to `sharedKeys` keys' work. */
  readonly shared?: boolean;
  /** Sent by source (EVAL) every time, never by hash: a call of it is never answered NOSCRIPT and sent again. */
  readonly bySource?: boolean;
}

/** What RedisStore needs of a client, whichever library it comes from. */
export interface ScriptClient {
  /** True on a Cluster: every key of one call must share a hash slot. */
  readonly cluster: boolean;
  /**
   * True when Redis runs the calls in the order sent: they go on one
   * connection (per node). False on a node-redis pool, which spreads them
   * over several connections, which reach Redis in any order.
   */
  readonly ordered: boolean;
  /**
   * Keys per shared call at most (lua/acquire-each.lua). A tick's acquires
   * split into calls of `SHARED_KEYS_WRITTEN_AT_ONCE` let Redis run one while
   * the store reads the answer to the one before (on ioredis at 256 in
   * flight, two calls of 128 gave about 1.4× the throughput of one of 256,
   * for the same Redis CPU; calls of 32 cost Redis a quarter more per
   * acquire). That takes each call written on its own: Redis runs every
   * command one read brings before it writes any reply, so calls written
   * together are answered together. ioredis and iovalkey write a command at
   * once. node-redis writes every command of one turn of the event loop in
   * one write at its end (`setImmediate`): on a node-redis client a tick's
   * first shared call (`firstSharedKeys`, 128 keys) goes at once and the rest
   * of the tick in calls of up to `MAX_SHARED_KEYS` in the next turn
   * (`SharedCallPerTurn`). At 256 in flight that gave 0.99×–1.09× ioredis's
   * throughput where one call per tick of up to 512 keys gave 0.62×–1.07×;
   * calls of 128 all written a turn apart fell behind a load of 512 acquires
   * a turn, and written together, behind one call of 512. A pool and a
   * cluster spread their calls over connections: `MAX_SHARED_KEYS`.
   */
  readonly sharedKeys: number;
  /** Keys of a tick's first shared call (per node) at most, when fewer than `sharedKeys`. */
  readonly firstSharedKeys?: number;
  /**
   * Runs `script` by EVALSHA, and by EVAL when the node answers NOSCRIPT
   * (after SCRIPT FLUSH, a restart or a failover), on the node serving the
   * first key. Replies as ioredis gives them: integers as numbers, bulk
   * strings as strings, nil as null, arrays as arrays; an error reply rejects.
   */
  runScript(script: Script, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
  /**
   * On a Cluster: its nodes, for a call that serves one node with keys of
   * several hash slots (lua/acquire-each.lua). Absent on a single Redis.
   */
  readonly nodes?: ClusterNodes;
  /**
   * Runs `run`, one of the store's operations, begun now: refused at once, as
   * the client's own command would be, once the client's `quit()` or
   * `disconnect()` has begun; else what the store opened of its own stays
   * open until it settles, however the client ends meanwhile. Absent where
   * the store uses the client itself (node-redis).
   */
  operation?<T>(run: () => Promise<T>): Promise<T>;
  /** Closes what the store opened of its own (the user's client stays open). */
  close(): void;
}

/** A Cluster's masters, as its client knows them now. */
export interface ClusterNodes {
  /** The address of the master serving `key`'s hash slot; undefined while the client knows none. */
  of(key: string): string | undefined;
  /**
   * Runs `script` on the master at `address`, on the connection the client
   * keeps to it (so after whatever the store sent there before), and nowhere
   * else: a redirection is not followed. When the node ran nothing (it
   * answered MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING or READONLY, could not
   * read the script, or is not known), it rejects with `NotRun`. `argKeys`:
   * keys the script reads from ARGV, after `args`, sent as the client sends
   * every key (with an ioredis `keyPrefix` before them, as in KEYS).
   */
  runScript(address: string, script: Script, keys: readonly string[], args: readonly (string | number)[], argKeys?: readonly string[]): Promise<unknown>;
}

/** A call a Cluster node did not run: nothing was applied, so its work may be sent again elsewhere. */
export class NotRun extends Error {
  /** The node cannot read the script at all (Redis 6.2 reads no `#!lua` flags line). */
  readonly unreadable: boolean;

  constructor(message: string, unreadable = false) {
    super(message);
    this.name = 'NotRun';
    this.unreadable = unreadable;
  }
}

/** Answers with which a node refuses a command before running any of it. */
const REFUSED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN|LOADING|READONLY|MASTERDOWN)\b/;
/** What Redis answers when it cannot compile a script: nothing of it ran. */
const UNREADABLE = /^ERR Error compiling script/;

/** `error` as a `NotRun` when the node ran nothing, else as it is. */
function refusal(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  if (UNREADABLE.test(error.message)) return new NotRun(error.message, true);
  return REFUSED.test(error.message) ? new NotRun(error.message) : error;
}

const ACCEPTED =
  'RedisStore needs an ioredis or iovalkey Redis or Cluster, or a node-redis 5 or 6 client (createClient) or cluster (createCluster)';

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith('NOSCRIPT');

/** The adapter for `client`, or a TypeError naming what is accepted. */
export function scriptClient(client: unknown): ScriptClient {
  if (client === null || typeof client !== 'object') throw new TypeError(`${ACCEPTED}, got ${client === null ? 'null' : typeof client}`);
  const c = client as Record<string, unknown>;
  // node-redis has evalSha and eval, never evalsha: this is ioredis's shape.
  if (typeof c['evalsha'] === 'function' && typeof c['eval'] === 'function' && typeof c['duplicate'] === 'function') {
    return ioredisLike(client as IoredisLikeClient);
  }
  if (typeof c['sendCommand'] === 'function') {
    if (Array.isArray(c['masters']) && typeof c['getSlotMaster'] === 'function') return nodeRedisCluster(client as NodeRedisCluster);
    if (typeof c['getMasterNode'] === 'function') {
      throw new TypeError(`${ACCEPTED}; a node-redis sentinel (createSentinel) is not supported`);
    }
    // a pool (createClientPool) has execute() and counts its clients; a client has neither
    if (typeof c['isOpen'] === 'boolean') return nodeRedisClient(client as NodeRedisClient, !(typeof c['execute'] === 'function' && typeof c['totalClients'] === 'number'));
    throw new TypeError(`${ACCEPTED}; a node-redis legacy-mode client (client.legacy()) is not supported: pass the client itself`);
  }
  throw new TypeError(`${ACCEPTED}, got an object with none of their methods`);
}

/**
 * ioredis and iovalkey re-send a command whose reply a dropped connection
 * lost, by default: the scripts run on a duplicate that never does
 * (own-connection.ts). node-redis rejects such a command instead.
 */
function ioredisLike(client: IoredisLikeClient): ScriptClient {
  const connection = new OwnConnection(client);
  connection.open();
  const cluster = client.isCluster === true;
  return {
    cluster,
    ordered: true,
    sharedKeys: SHARED_KEYS_WRITTEN_AT_ONCE,
    async runScript(script, keys, args) {
      try {
        return await connection.use((own) => {
          // the connection Redis runs it on: on a Cluster, the one to the master of its first key's slot
          const on = cluster ? (masterOf(own as Cluster, keyPrefixOf(own) + keys[0]!) ?? own) : own;
          return bySource(on, script, 'close')
            ? own.eval(script.source, keys.length, ...keys, ...args)
            : own.evalsha(script.sha, keys.length, ...keys, ...args);
        });
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await connection.use((own) => own.eval(script.source, keys.length, ...keys, ...args));
      }
    },
    ...(cluster ? { nodes: ioredisNodes(connection) } : {}),
    operation: (run) => connection.hold(run),
    close: () => connection.close(),
  };
}

/** The master at `address` (`host:port`, as ioredis names nodes in `slots`) of a ready ioredis Cluster. */
function master(own: Cluster, address: string): Redis | undefined {
  if (own.status !== 'ready') return undefined;
  return own.nodes('master').find(({ options }) => `${options.host}:${options.port}` === address);
}

/** The address of the master a ready ioredis Cluster sends `key` to. */
function addressOf(own: Cluster, key: string): string | undefined {
  return own.status === 'ready' ? own.slots[clusterSlot(key)]?.[0] : undefined;
}

/** The connection to the master a ready ioredis Cluster sends `key` to. */
function masterOf(own: Cluster, key: string): Redis | undefined {
  const address = addressOf(own, key);
  return address === undefined ? undefined : master(own, address);
}

/** The masters of the store's own ioredis (or iovalkey) Cluster: `ClusterNodes`. */
function ioredisNodes(connection: OwnConnection): ClusterNodes {
  return {
    of(key) {
      const own = connection.current;
      return own === undefined ? undefined : addressOf(own as Cluster, keyPrefixOf(own) + key);
    },
    async runScript(address, script, keys, args, argKeys = []) {
      /** Runs `command` on the master at `address` with the KEYS and ARGV Redis is to receive. */
      const run = (command: (node: Redis, keys: string[], args: (string | number)[]) => Promise<unknown>): Promise<unknown> =>
        connection.use(async (own) => {
          const node = master(own as Cluster, address);
          if (node === undefined) throw new NotRun(`no master at ${address}`);
          // The keys as the Cluster writes them (its keyPrefix before each); the node puts its own before KEYS.
          const prefix = keyPrefixOf(own);
          const nodePrefix = node.options.keyPrefix ?? '';
          const written = keys.map((key) => prefix + key);
          if (!written.every((key) => key.startsWith(nodePrefix))) throw new NotRun(`the node's keyPrefix is not the Cluster's`);
          try {
            return await command(
              node,
              written.map((key) => key.slice(nodePrefix.length)),
              [...args, ...argKeys.map((key) => prefix + key)],
            );
          } catch (error) {
            throw refusal(error);
          }
        });
      try {
        return await run((node, k, a) =>
          bySource(node, script, 'close') ? node.eval(script.source, k.length, ...k, ...a) : node.evalsha(script.sha, k.length, ...k, ...a),
        );
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await run((node, k, a) => node.eval(script.source, k.length, ...k, ...a));
      }
    },
  };
}

/** What an ioredis (iovalkey) client writes before every key it sends: its `keyPrefix` (a Cluster's, else its nodes'). */
function keyPrefixOf(own: Redis | Cluster): string {
  return own.options.keyPrefix ?? '';
}

/** node-redis's default reply types (integers as numbers, bulk strings as strings), overriding the client's typeMapping. */
const NODE_REDIS_OPTIONS: NodeRedisCommandOptions = { typeMapping: {} };

/** EVALSHA's arguments; node-redis takes strings only. */
function evalShaCommand(script: Script, keys: readonly string[], args: readonly (string | number)[]): string[] {
  const command = ['EVALSHA', script.sha, String(keys.length), ...keys];
  for (const arg of args) command.push(String(arg));
  return command;
}

/** The same call by EVAL, for a node that lacks the script. */
function asEval(command: string[], script: Script): string[] {
  const again = command.slice();
  again[0] = 'EVAL';
  again[1] = script.source;
  return again;
}

/**
 * Hands calls to a node-redis client so that shared calls are written apart
 * (`sharedKeys`): a turn's first shared call at once, and every call asked
 * after it in that turn all together in the next turn, so nothing waits more
 * than one turn, however many calls a turn makes. Other calls asked while
 * nothing waits go at once. In the order asked: calls reach Redis in the
 * order the store made them.
 */
class SharedCallPerTurn {
  readonly #held: (() => void)[] = [];
  /** Whether a shared call was handed over in this turn. */
  #handed = false;

  send<T>(shared: boolean, send: () => Promise<T>): Promise<T> {
    if (this.#held.length === 0 && !(shared && this.#handed)) return this.#now(shared, send);
    return new Promise<T>((resolve, reject) => {
      this.#held.push(() => void this.#now(shared, send).then(resolve, reject));
    });
  }

  #now<T>(shared: boolean, send: () => Promise<T>): Promise<T> {
    const reply = send();
    if (shared && !this.#handed) {
      this.#handed = true;
      // after node-redis's own setImmediate, which sendCommand set: it writes what was handed so far first
      setImmediate(this.#nextTurn);
    }
    return reply;
  }

  readonly #nextTurn = (): void => {
    this.#handed = false;
    for (const go of this.#held.splice(0)) go();
  };
}

function nodeRedisClient(client: NodeRedisClient, ordered: boolean): ScriptClient {
  // one connection: shared calls written apart; a pool writes calls of one turn on different connections
  const turns = ordered ? new SharedCallPerTurn() : undefined;
  return {
    cluster: false,
    ordered,
    sharedKeys: MAX_SHARED_KEYS,
    firstSharedKeys: ordered ? SHARED_KEYS_WRITTEN_AT_ONCE : MAX_SHARED_KEYS,
    async runScript(script, keys, args) {
      const shared = script.shared === true;
      /** Sends `command`, in its place among the store's calls. */
      const send = (command: string[]): Promise<unknown> => {
        const go = (): Promise<unknown> => client.sendCommand(command, NODE_REDIS_OPTIONS);
        return turns === undefined ? go() : turns.send(shared, go);
      };
      const command = evalShaCommand(script, keys, args);
      try {
        // a pool's connections are its own: each call by hash there
        return await send(bySource(ordered ? client : undefined, script, 'connect') ? asEval(command, script) : command);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await send(asEval(command, script));
      }
    },
    close: () => undefined,
  };
}

/** What a node-redis cluster not connected (or closed) would otherwise fail with: a TypeError from inside it. */
function assertOpen(cluster: NodeRedisCluster): void {
  if (!cluster.isOpen) throw new Error('The node-redis cluster is closed: connect it (await cluster.connect()) before the store uses it');
}

function nodeRedisCluster(cluster: NodeRedisCluster): ScriptClient {
  /** The client of the master at `address`, once connected. */
  const master = (address: string) => cluster.masters.find((m) => m.address === address)?.client;
  return {
    cluster: true,
    ordered: true,
    sharedKeys: MAX_SHARED_KEYS,
    nodes: {
      of: (key) => (cluster.isOpen ? cluster.slots[clusterSlot(key)]?.master.address : undefined),
      async runScript(address, script, keys, args, argKeys = []) {
        const send = async (command: string[]): Promise<unknown> => {
          const client = master(address);
          if (client === undefined || !client.isReady) throw new NotRun(`no connected master at ${address}`);
          try {
            return await client.sendCommand(command, NODE_REDIS_OPTIONS);
          } catch (error) {
            throw refusal(error);
          }
        };
        const command = evalShaCommand(script, keys, [...args, ...argKeys]);
        const client = master(address);
        try {
          return await send(bySource(client, script, 'connect') ? asEval(command, script) : command);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return await send(asEval(command, script));
        }
      },
    },
    async runScript(script, keys, args) {
      assertOpen(cluster);
      const command = evalShaCommand(script, keys, args);
      // The first key picks the slot's master (RedisStore keeps every key of a call in one slot).
      const first = keys[0];
      const on = first === undefined ? undefined : cluster.slots[clusterSlot(first)]?.master.client;
      try {
        return await cluster.sendCommand(first, false, bySource(on, script, 'connect') ? asEval(command, script) : command, NODE_REDIS_OPTIONS);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await cluster.sendCommand(first, false, asEval(command, script), NODE_REDIS_OPTIONS);
      }
    },
    close: () => undefined,
  };
}
