// Exit watching: a verified pidfd polled on the environment's libuv loop (readable at exit), so
// waiting costs no thread and no polling timer.
#ifndef PIDFENCE_EXIT_WATCH_H
#define PIDFENCE_EXIT_WATCH_H

#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "pidfd.h"

namespace pidfence {

struct Watch;

// One environment's watches, keyed by a small integer rather than handed to JS as pointers: a
// late cancel after the watch fired finds nothing and does nothing. Touched only by the thread
// of the environment that owns it.
struct ExitWatches {
  std::unordered_map<uint32_t, Watch*> by_id;
  uint32_t next_id = 1;
  // Poll handles started and not yet through their close callback (the table entry is gone
  // before the handle is closed).
  size_t open_handles = 0;
  // Set once the environment is being torn down: no new watch starts after that.
  bool tearing_down = false;
  napi_async_cleanup_hook_handle cleanup_hook = nullptr;
};

// Registers the environment cleanup hook that closes every watch's poll handle and pidfd before
// the environment's loop is closed (a worker's loop, when the worker ends or is terminated).
// Returns false if N-API refused the hook.
bool exit_watches_attach(Napi::Env env, ExitWatches* watches);

// JS: exitWatchStart(pid, bootId, startTicks, pidfsIno | "", callback, hold) →
//   { kind: "watching", id } | { kind, reason?, errno? }.
// The callback is called once with "exited" (or "error" if the loop reports one). With `hold`
// the process must lead its group (else identity_mismatch, not_group_leader), and the verified
// pidfd stays open after the exit until exitWatchCancel(id).
Napi::Value exit_watch_start(const Napi::CallbackInfo& info);

// JS: exitWatchGroupSignal(id, signo) → { kind: "signalled" | "already_exited" (group empty)
//   | "unsupported" | "error" }. Signals the process group of the held pidfd's process.
Napi::Value exit_watch_group_signal(const Napi::CallbackInfo& info);

// JS: exitWatchCancel(id) → true if a watch was stopped (its pidfd closed), false if it
// had already fired or never existed.
Napi::Value exit_watch_cancel(const Napi::CallbackInfo& info);

// Starts watching an open descriptor on the environment's loop (exit_watch_start's second half).
// `repeat`: an inotify descriptor, drained and reported as "changed" on every change until cancelled.
Napi::Value watch_start(Napi::Env env, UniquePidfd fd, Napi::Function callback, bool hold, bool repeat);

// Shared by the entry points: a Result as a plain JS object.
Napi::Object result_to_object(Napi::Env env, const struct Result& result);

}  // namespace pidfence

#endif
