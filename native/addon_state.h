// Everything the addon keeps between calls lives here, one instance per Node environment (the
// main thread and every worker_threads worker have their own), handed over as N-API instance
// data. Nothing environment-bound is a process global: a JS value, a callback or a uv handle of
// one environment is never reached from another thread (docs/decisions/0007).
#ifndef PIDFENCE_ADDON_STATE_H
#define PIDFENCE_ADDON_STATE_H

#include <napi.h>

#include "exit_watch.h"

namespace pidfence {

struct AddonState {
  // The project's error class (setErrorClass), used by args_type_error.
  Napi::FunctionReference error_class;
  ExitWatches exit_watches;
};

// The calling environment's state; set up by the module's init before any entry point runs.
AddonState& addon_state(Napi::Env env);

}  // namespace pidfence

#endif
