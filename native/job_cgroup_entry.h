// JS entry points of the job cgroup (docs/decisions/0180); registered by addon.cc.
//   cgroupRead(subtree, id) → { kind: "ok", populated, frozen } | { kind: "gone" | "error", errno? }
//   cgroupFreeze(subtree, id, frozen) / cgroupKill(subtree, id) / cgroupRemove(subtree, id)
//     → { kind: "ok" | "gone" | "busy" | "unsupported" | "error", errno? }
//   cgroupSignalMembers(subtree, id, signo) → { kind, signalled }
//   cgroupLearnName(subtree, id, name) → { kind: "ok" | "gone" | ..., errno? }
//   cgroupWatchStart(subtree, id, callback) → { kind: "watching", id } | { kind, errno? };
//     callback("changed") on every change of cgroup.events until exitWatchCancel(id).
#ifndef PIDFENCE_JOB_CGROUP_ENTRY_H
#define PIDFENCE_JOB_CGROUP_ENTRY_H

#include <napi.h>

namespace pidfence {

Napi::Value cgroup_read(const Napi::CallbackInfo& info);
Napi::Value cgroup_freeze(const Napi::CallbackInfo& info);
Napi::Value cgroup_signal_members(const Napi::CallbackInfo& info);
Napi::Value cgroup_kill(const Napi::CallbackInfo& info);
Napi::Value cgroup_remove(const Napi::CallbackInfo& info);
Napi::Value cgroup_learn_name(const Napi::CallbackInfo& info);
Napi::Value cgroup_watch_start(const Napi::CallbackInfo& info);

}  // namespace pidfence

#endif
