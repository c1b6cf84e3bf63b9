// pidfence/store: the store interfaces, types only. A program that writes its own store, or code
// that accepts either store, imports these; nothing here loads a driver or runs at import.
export type { DispatchRepository } from './dispatch-repository';
export type { RunStore } from './run-store';
export type { ExecutionStore } from './execution-store';
export type { RunnerStore } from './runner-store';
export type {
  BlockedPosition,
  BlockedRows,
  GrantAdministration,
  GrantChange,
  ManagementStore,
} from './management-store';
