// A MemoryStore on a clock of your own, as in tests (docs/memory-store.md):
// `npx tsx examples/memory-store.ts`.
import { MemoryStore, Rate, TokenBucket } from '../src/index.js';

const search = new TokenBucket('search', 20, new Rate(1, 3000)); // 20 in a burst, then one every 3 s

let now = Date.now();
const store = new MemoryStore({ now: () => now });
console.log(await store.acquire(search, 'ann', 20)); // the whole burst
console.log(await store.acquire(search, 'ann')); // nothing left: the wait, in ms
now += 3000; // one token later
console.log(await store.acquire(search, 'ann'));
