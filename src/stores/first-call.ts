/** A connection whose scripts the store tracks: an ioredis `Redis`, a node-redis client, or what stands for one. */
interface Connection {
  on(event: string, listener: () => void): unknown;
}

/** A script as the clients send it: by hash, or by source (`bySource`: always). */
interface SentScript {
  readonly sha: string;
  readonly bySource?: boolean;
}

/** Per connection, the scripts sent on it by source since it last connected. */
const sent = new WeakMap<object, Set<string>>();

/**
 * Whether this is the first call of the script `sha` on `connection` since it
 * connected (`reconnected`: the event it emits on a new socket), which is then
 * sent by source (EVAL) and every later one by hash (EVALSHA). Redis runs a
 * connection's commands in order, so it has the script before any later call
 * asks for it: no call is answered NOSCRIPT and sent again behind calls made
 * after it, which Redis would then run first. (After SCRIPT FLUSH, or a
 * failover the connection survives, a call answered NOSCRIPT is still sent
 * again by source.)
 */
function firstCallOn(connection: Connection, sha: string, reconnected: string): boolean {
  let shas = sent.get(connection);
  if (shas === undefined) {
    const fresh = new Set<string>();
    sent.set(connection, fresh);
    connection.on(reconnected, () => fresh.clear());
    shas = fresh;
  }
  if (shas.has(sha)) return false;
  shas.add(sha);
  return true;
}

/**
 * Whether to send a call of `script` on `connection` (undefined: not known) by
 * source (EVAL): a script marked `bySource` always, so that no call is ever
 * answered NOSCRIPT and sent again behind calls the store made after it (a
 * reset that ran after them would take back what they took, tokens taken
 * after it was made); any other on its first call on the connection
 * (`firstCallOn`).
 */
export function bySource(connection: Connection | undefined, script: SentScript, reconnected: string): boolean {
  if (script.bySource === true) return true;
  return connection !== undefined && firstCallOn(connection, script.sha, reconnected);
}
