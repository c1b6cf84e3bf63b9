// Prometheus metrics (docs/decisions/0110, 0112): loaded only when metrics are asked for, since it
// loads prom-client. Callers import it with `await import(...)`, never statically.
import { assertPeerInstalled } from '../base/optional-peers';

// prom-client is an optional peer (docs/decisions/0223): one sentence before the import below would fail.
assertPeerInstalled('prom-client', 'pidfence/metrics (supervise --metrics-port, control-plane --metrics)');

export { STOP_MODES } from '../dispatch/index';
export {
  createMetrics,
  validateMetricsProjects,
  METRICS_PROJECTS_MAX,
  type Metrics,
  type MetricsOptions,
  type ProjectGauges,
} from './registry';
