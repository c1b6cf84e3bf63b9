// pidfence/contract: the canonical CancellationDispatch contract (design/dispatch §2, design/postgres §D1-D2).
// Pure code: it imports node:crypto and the project's errors, nothing with I/O.
export * from './limits';
export * from './classification';
export * from './validators';
export * from './token';
export * from './backoff';
export * from './events';
export * from './cancellation-dispatch';
export * from './run';
export * from './management';
export * from './execution';
export * from './execution-validators';
export * from './runner';
export * from './fleet';
