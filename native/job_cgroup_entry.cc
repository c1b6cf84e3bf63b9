// The job cgroup's entry points (docs/decisions/0180): argument decoding and result objects only;
// the kernel-facing work is in job_cgroup.cc. Each call takes (subtree, id) and finds the cgroup
// again by its id, so a JS caller never holds a cgroup descriptor.
#include "job_cgroup_entry.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "addon_args.h"
#include "addon_state.h"
#include "exit_watch.h"
#include "job_cgroup.h"

namespace pidfence {
namespace {

constexpr size_t kSubtreeMax = 4096;
thread_local char subtree_path[kSubtreeMax + 1];

bool args_cgroup(const Napi::CallbackInfo& info, uint64_t* id) {
  if (!info[0].IsString() || !args_decimal_u64(info[1], id)) return false;
  size_t length = 0;
  if (napi_get_value_string_utf8(info.Env(), info[0], subtree_path, sizeof subtree_path, &length) != napi_ok) return false;
  return length > 0 && length < kSubtreeMax && subtree_path[0] == '/' && std::strlen(subtree_path) == length;
}

Napi::Object cgroup_object(Napi::Env env, const CgroupResult& result) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", cgroup_outcome_name(result.outcome));
  if (result.outcome == CgroupOutcome::failed) {
    const char* name = strerrorname_np(result.error);
    out.Set("errno", name != nullptr ? name : "EUNKNOWN");
  }
  return out;
}

// Opens the cgroup named by info[0..1]; on anything but ok, *failure holds the answer to return.
bool cgroup_opened(const Napi::CallbackInfo& info, const char* usage, uint64_t* id, UniquePidfd* dir, Napi::Value* failure) {
  if (!args_cgroup(info, id)) {
    *failure = args_type_error(info.Env(), usage);
    return false;
  }
  const CgroupResult opened = job_cgroup_open(subtree_path, *id, dir);
  if (opened.outcome == CgroupOutcome::ok) return true;
  *failure = cgroup_object(info.Env(), opened);
  return false;
}

}  // namespace

Napi::Value cgroup_read(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  UniquePidfd dir;
  Napi::Value failure;
  if (!cgroup_opened(info, "cgroupRead(subtree, id)", &id, &dir, &failure)) return failure;
  CgroupEvents events{};
  const CgroupResult read = job_cgroup_events(dir.get(), &events);
  Napi::Object out = cgroup_object(info.Env(), read);
  if (read.outcome == CgroupOutcome::ok) {
    out.Set("populated", events.populated);
    out.Set("frozen", events.frozen);
  }
  return out;
}

Napi::Value cgroup_freeze(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  UniquePidfd dir;
  Napi::Value failure;
  if (!info[2].IsBoolean()) return args_type_error(info.Env(), "cgroupFreeze(subtree, id, frozen)");
  if (!cgroup_opened(info, "cgroupFreeze(subtree, id, frozen)", &id, &dir, &failure)) return failure;
  return cgroup_object(info.Env(), job_cgroup_freeze(dir.get(), info[2].As<Napi::Boolean>().Value()));
}

// info[3]: the proof to try first, "auto" (PIDFD_GET_INFO where the kernel has it) or "listing".
// A stack buffer, never std::string: no allocation on the signalling path.
bool args_proof(const Napi::Value& value, CgroupProof* proof) {
  char name[16];
  size_t length = 0;
  if (!value.IsString() || napi_get_value_string_utf8(value.Env(), value, name, sizeof name, &length) != napi_ok) return false;
  if (std::strcmp(name, "auto") == 0) *proof = CgroupProof::pidfd_info;
  else if (std::strcmp(name, "listing") == 0) *proof = CgroupProof::listing;
  else return false;
  return true;
}

Napi::Value cgroup_signal_members(const Napi::CallbackInfo& info) {
  constexpr const char* kUsage = "cgroupSignalMembers(subtree, id, signo, proof)";
  uint64_t id = 0;
  UniquePidfd dir;
  Napi::Value failure;
  CgroupProof proof = CgroupProof::pidfd_info;
  if (!info[2].IsNumber() || !args_proof(info[3], &proof)) return args_type_error(info.Env(), kUsage);
  const int signo = info[2].As<Napi::Number>().Int32Value();
  if (signo < 1 || signo > 64) return args_type_error(info.Env(), "cgroupSignalMembers: signo out of range");
  if (!cgroup_opened(info, kUsage, &id, &dir, &failure)) return failure;
  uint32_t signalled = 0;
  const CgroupResult result = job_cgroup_signal_members(dir.get(), id, signo, &proof, &signalled);
  Napi::Object out = cgroup_object(info.Env(), result);
  out.Set("signalled", Napi::Number::New(info.Env(), signalled));
  out.Set("proof", proof == CgroupProof::listing ? "listing" : "pidfd-info");
  return out;
}

Napi::Value cgroup_kill(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  UniquePidfd dir;
  Napi::Value failure;
  if (!cgroup_opened(info, "cgroupKill(subtree, id)", &id, &dir, &failure)) return failure;
  return cgroup_object(info.Env(), job_cgroup_kill(dir.get()));
}

Napi::Value cgroup_remove(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  if (!args_cgroup(info, &id)) return args_type_error(info.Env(), "cgroupRemove(subtree, id)");
  return cgroup_object(info.Env(), job_cgroup_remove(subtree_path, id));
}

Napi::Value cgroup_learn_name(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  char name[256];
  size_t length = 0;
  if (!args_cgroup(info, &id) || !info[2].IsString() ||
      napi_get_value_string_utf8(info.Env(), info[2], name, sizeof name, &length) != napi_ok || length == 0 ||
      length >= sizeof name - 1 || std::strlen(name) != length || std::strchr(name, '/') != nullptr ||
      std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) {
    return args_type_error(info.Env(), "cgroupLearnName(subtree, id, name)");
  }
  return cgroup_object(info.Env(), job_cgroup_learn_name(subtree_path, id, name));
}

Napi::Value cgroup_watch_start(const Napi::CallbackInfo& info) {
  uint64_t id = 0;
  UniquePidfd dir;
  Napi::Value failure;
  if (!info[2].IsFunction()) return args_type_error(info.Env(), "cgroupWatchStart(subtree, id, callback)");
  if (!cgroup_opened(info, "cgroupWatchStart(subtree, id, callback)", &id, &dir, &failure)) return failure;
  if (addon_state(info.Env()).exit_watches.tearing_down) return cgroup_object(info.Env(), CgroupResult{CgroupOutcome::failed, ECANCELED});
  UniquePidfd watch;
  const CgroupResult started = job_cgroup_watch_events(dir.get(), &watch);
  if (started.outcome != CgroupOutcome::ok) return cgroup_object(info.Env(), started);
  return watch_start(info.Env(), std::move(watch), info[2].As<Napi::Function>(), false, true);
}

}  // namespace pidfence
