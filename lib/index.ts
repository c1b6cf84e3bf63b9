// pidfence: the root entry. It re-exports the edge-safe pieces only; PostgreSQL code lives behind
// its own subpath (pidfence/postgres) and never loads here.
export { PidfenceError, PidfenceRangeError, PidfenceTypeError } from './base/errors';
export * as native from './native/index';
