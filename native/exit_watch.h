// Exit watching: a verified pidfd polled on the libuv loop (readable at exit), so waiting
// costs no thread and no polling timer.
#ifndef PIDFENCE_EXIT_WATCH_H
#define PIDFENCE_EXIT_WATCH_H

#include <napi.h>

namespace pidfence {

// JS: exitWatchStart(pid, bootId, startTicks, pidfsIno | "", callback, hold) →
//   { outcome: "watching", id } | { outcome, reason?, errno? }.
// The callback is called once with "exited" (or "error" if the loop reports one). With `hold`
// the verified pidfd stays open after the exit until exitWatchCancel(id).
Napi::Value exit_watch_start(const Napi::CallbackInfo& info);

// JS: exitWatchGroupSignal(id, signo) → { outcome: "signalled" | "already_exited" (group empty)
//   | "unsupported" | "error" }. Signals the process group of the held pidfd's process.
Napi::Value exit_watch_group_signal(const Napi::CallbackInfo& info);

// JS: exitWatchCancel(id) → true if a watch was stopped (its pidfd closed), false if it
// had already fired or never existed.
Napi::Value exit_watch_cancel(const Napi::CallbackInfo& info);

// Shared by the entry points: a Result as a plain JS object.
Napi::Object result_to_object(Napi::Env env, const struct Result& result);

}  // namespace pidfence

#endif
