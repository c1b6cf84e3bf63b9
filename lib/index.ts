// pidfence: the root entry. It re-exports the edge-safe pieces only; PostgreSQL and cluster
// code live behind their own subpaths (pidfence/postgres, pidfence/cluster) and never load here.
export { PidfenceError, PidfenceRangeError, PidfenceTypeError } from './base/errors';
export * as native from './native/index';
