/** A connection whose scripts the store tracks: an ioredis `Redis`, a node-redis client, or what stands for one. */
interface Connection {
  on(event: string, listener: () => void): unknown;
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
export function firstCallOn(connection: Connection, sha: string, reconnected: string): boolean {
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
