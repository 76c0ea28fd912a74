/** Hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** CRC-16/XMODEM (polynomial 0x1021), as Redis Cluster hashes keys: one entry per byte value. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

const encoder = new TextEncoder();

/**
 * The hash slot of `key`, as Redis Cluster computes it: of the part between
 * the first `{` and the next `}` when that part is not empty, else of the
 * whole key; over its UTF-8 bytes, as clients send it.
 */
export function clusterSlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of encoder.encode(key)) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc % CLUSTER_SLOTS;
}
