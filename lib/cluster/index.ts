// pidfence/cluster: remote workers on the pull path (docs/decisions/0100, 0101; design/cluster). Loads
// pg; never loaded by the root, edge or standalone entries.
import { assertPeerInstalled } from '../base/optional-peers';

// `pg` is an optional peer (docs/decisions/0223): one sentence before the imports below would fail.
assertPeerInstalled('pg', 'pidfence/cluster');

export { DispatchAvailability } from './availability';
export type { AvailabilityState, DispatchFailureCode } from './availability';
export { CancellationDispatchControl, DispatchFailedClosed } from './dispatch-control';
export type {
  ControlledTickAnswer,
  DispatchControlOptions,
  DispatchObservation,
  LeaseControl,
} from './dispatch-control';
export { ClusterLeaseStore, REAP_PAGE } from '../store/postgres/index';
export type {
  Assignment,
  CompletionOutcome,
  CompletionReport,
  LeaseRef,
  LeaseTickAnswer,
  PullOutcome,
  WorkerCaller,
} from '../store/postgres/index';
export { startControlPlane } from './control-plane';
export type { ControlPlane, ControlPlaneOptions, ControlPlaneTls } from './control-plane';
export { ControlPlaneClient } from './client';
export type { ClientReply, ClientTls } from './client';
export { startWorker } from './worker';
export type { Worker, WorkerOptions } from './worker';
