// Moving a hash slot between the masters of a test cluster, the way
// `redis-cli --cluster reshard` does it: IMPORTING on the target, MIGRATING on
// the source, MIGRATE of its keys, then SETSLOT NODE on every master. Done
// over connections of its own, so that a client under test keeps the slot
// map it had: it learns of the move only from a MOVED or ASK.
import { Redis } from 'ioredis';
import { CLUSTER_SLOTS, clusterSlot } from '../../src/stores/cluster-slot.js';

export interface SlotMover {
  /** Index (in the order given) of the master serving `key` now. */
  masterOf(key: string): Promise<number>;
  /** Per hash slot, the index of the master serving it now. */
  owners(): Promise<number[]>;
  /**
   * Moves `key`'s slot to master `to`, in steps: `importing` (IMPORTING and
   * MIGRATING set, no key moved), `migrated` (its keys moved, the slot still
   * the source's), `moved` (every master told the new owner).
   */
  move(key: string, to: number, until?: 'importing' | 'migrated' | 'moved'): Promise<void>;
  /** Ends a move left at `importing` or `migrated`: keys moved, every master told. */
  finish(key: string): Promise<void>;
  close(): void;
}

/** Over the cluster's masters (`nodes`, in slot order). */
export function slotMover(nodes: readonly { host: string; port: number }[]): SlotMover {
  const admins = nodes.map(({ host, port }) => new Redis(port, host));
  const ids = Promise.all(admins.map((a) => a.call('CLUSTER', 'MYID') as Promise<string>));
  /** Moves in progress: slot → [from, to]. */
  const moving = new Map<number, [number, number]>();

  async function owners(): Promise<number[]> {
    const shards = (await admins[0]!.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const all = await ids;
    const owner = new Array<number>(CLUSTER_SLOTS).fill(-1);
    for (const [first, last, [, , id]] of shards) owner.fill(all.indexOf(id), first, last + 1);
    return owner;
  }

  async function masterOf(key: string): Promise<number> {
    return (await owners())[clusterSlot(key)]!;
  }

  async function migrateKeys(slot: number, from: number, to: number): Promise<void> {
    const { host, port } = nodes[to]!;
    for (;;) {
      const keys = (await admins[from]!.call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
      if (keys.length === 0) return;
      await admins[from]!.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', ...keys);
    }
  }

  async function finish(key: string): Promise<void> {
    const slot = clusterSlot(key);
    const [from, to] = moving.get(slot)!;
    await migrateKeys(slot, from, to);
    const id = (await ids)[to]!;
    // the target first, then the source, then the rest (as redis-cli does)
    for (const i of [to, from, ...admins.keys()].filter((v, j, all) => all.indexOf(v) === j)) await admins[i]!.call('CLUSTER', 'SETSLOT', slot, 'NODE', id);
    moving.delete(slot);
  }

  return {
    masterOf,
    owners,
    async move(key, to, until = 'moved') {
      const slot = clusterSlot(key);
      if (moving.has(slot)) await finish(key); // a move left half done ends first
      const from = await masterOf(key);
      if (from === to) return;
      const all = await ids;
      await admins[to]!.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', all[from]!);
      await admins[from]!.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', all[to]!);
      moving.set(slot, [from, to]);
      if (until === 'importing') return;
      await migrateKeys(slot, from, to);
      if (until === 'migrated') return;
      await finish(key);
    },
    finish,
    close() {
      for (const a of admins) a.disconnect();
    },
  };
}
