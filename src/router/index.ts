// graphql-token-bucket/router: the limiter as an Apollo Router coprocessor,
// a Node request listener speaking the Router's coprocessor protocol.
export { routerCoprocessor } from './router-coprocessor.js';
export { DEFAULT_MAX_PAYLOAD_BYTES, MIN_CONTEXT_SECRET_LENGTH } from './options.js';
export type { RouterCoprocessorOptions, RouterRequest } from './options.js';
export { CHARGE_CONTEXT_KEY, REFUND_WINDOW_MS } from './charge-record.js';
