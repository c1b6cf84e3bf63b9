// Module registration and argument glue only; the kernel-facing logic lives in
// proc_stat.cc, boot_id.cc, boot_clock.cc, pidfd.cc, exit_watch.cc and job_cgroup.cc. No C++ exceptions are compiled in.
#include <napi.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "addon_args.h"
#include "addon_state.h"
#include "boot_clock.h"
#include "boot_id.h"
#include "exit_watch.h"
#include "job_cgroup_entry.h"
#include "pidfd.h"
#include "proc_stat.h"

#define PIDFENCE_STRINGIFY_INNER(x) #x
#define PIDFENCE_STRINGIFY(x) PIDFENCE_STRINGIFY_INNER(x)

namespace pidfence {
namespace {

constexpr pid_t kPidMax = 4194304;  // PID_MAX_LIMIT on 64-bit Linux
// One extra byte so a 37-character string is seen as too long rather than cut to 36. Per
// thread: each environment (main thread, every worker) decodes arguments on its own thread, and
// `Expected::boot_id` points here only for the duration of one synchronous entry point.
thread_local char expected_boot_id[kBootIdLength + 2];

Napi::Object errno_object(Napi::Env env, const char* status, int error) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", status);
  const char* name = strerrorname_np(error);
  out.Set("errno", name != nullptr ? name : "EUNKNOWN");
  return out;
}

Napi::Value set_error_class(const Napi::CallbackInfo& info) {
  if (!info[0].IsFunction()) {
    Napi::TypeError::New(info.Env(), "setErrorClass(cls)").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  addon_state(info.Env()).error_class = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Value read_process_stat(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  pid_t pid = 0;
  if (!args_pid(info[0], &pid)) return args_type_error(env, "readProcessStat(pid)");
  ProcStat stat{};
  int error = 0;
  switch (proc_stat_read(pid, &stat, &error)) {
    case ProcStatRead::gone: {
      Napi::Object out = Napi::Object::New(env);
      out.Set("kind", "gone");
      return out;
    }
    case ProcStatRead::failed:
      return errno_object(env, "error", error);
    case ProcStatRead::ok:
      break;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", "ok");
  out.Set("pid", Napi::Number::New(env, stat.pid));
  out.Set("state", std::string(1, stat.state));
  out.Set("ppid", Napi::Number::New(env, stat.ppid));
  out.Set("pgid", Napi::Number::New(env, stat.pgid));
  out.Set("sid", Napi::Number::New(env, stat.sid));
  out.Set("startTicks", std::to_string(stat.start_ticks));
  return out;
}

Napi::Value boot_id(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int error = 0;
  const char* id = boot_id_get(&error);
  if (id == nullptr) return errno_object(env, "error", error);
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", "ok");
  out.Set("bootId", id);
  return out;
}

Napi::Value boot_clock(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int error = 0;
  int64_t ms = 0;
  if (!boot_clock_ms(&ms, &error)) return errno_object(env, "error", error);
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", "ok");
  // Milliseconds since boot stay far below 2^53 (285,000 years): exact as a JS number.
  out.Set("ms", Napi::Number::New(env, static_cast<double>(ms)));
  return out;
}

Napi::Value capture_identity(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  pid_t pid = 0;
  if (!args_pid(info[0], &pid)) return args_type_error(env, "captureIdentity(pid)");
  Identity identity{};
  const Result verdict = identity_capture(pid, &identity);
  if (verdict.outcome != Outcome::verified) return result_to_object(env, verdict);
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", "verified");
  out.Set("pid", Napi::Number::New(env, identity.pid));
  out.Set("bootId", identity.boot_id);
  out.Set("startTicks", std::to_string(identity.start_ticks));
  out.Set("pgid", Napi::Number::New(env, identity.pgid));
  if (identity.has_pidfs_ino) out.Set("pidfsIno", std::to_string(identity.pidfs_ino));
  return out;
}

Napi::Value capabilities(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Capabilities& caps = capabilities_get();
  Napi::Object out = Napi::Object::New(env);
  out.Set("pidfdOpen", caps.pidfd_open);
  out.Set("pidfdSendSignal", caps.pidfd_send_signal);
  out.Set("processGroupFlag", caps.process_group_flag);
  out.Set("pidfdGetInfo", caps.pidfd_get_info);
  out.Set("pidfsIdentity", caps.pidfs_identity);
  return out;
}

// The hot path returns one int32 instead of an object: building a result object with string
// keys cost more than the syscalls it reports (bench/signal-latency). Layout, decoded by
// lib/native/verdict.ts: bits 0-3 outcome, 4-7 mismatch, 8-11 mode, 16-31 errno.
int32_t verdict_pack(const Result& result) {
  return static_cast<int32_t>(static_cast<uint32_t>(result.outcome) |
                              (static_cast<uint32_t>(result.mismatch) << 4) |
                              (static_cast<uint32_t>(result.mode) << 8) |
                              (static_cast<uint32_t>(result.error & 0x7fff) << 16));
}

// signalVerified(pid, bootId, startTicks, pidfsIno | "", signo, group, forceGroupFallback) → int32
Napi::Value signal_verified_entry(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Expected expected{};
  if (!args_expected(info, 0, &expected) || !info[4].IsNumber() || !info[5].IsBoolean() ||
      !info[6].IsBoolean()) {
    return args_type_error(env, "signalVerified(pid, bootId, startTicks, pidfsIno, signo, group, force)");
  }
  const int signo = info[4].As<Napi::Number>().Int32Value();
  if (signo < 0 || signo > 64) return args_type_error(env, "signalVerified: signo out of range");
  const bool group = info[5].As<Napi::Boolean>().Value();
  const GroupFallback fallback =
      info[6].As<Napi::Boolean>().Value() ? GroupFallback::forced : GroupFallback::when_needed;
  return Napi::Number::New(env, verdict_pack(signal_verified(expected, signo, group, fallback)));
}

Napi::Value build_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  out.Set("sourceDigest", PIDFENCE_STRINGIFY(PIDFENCE_SOURCE_DIGEST));
  out.Set("napiVersion", Napi::Number::New(env, NAPI_VERSION));
#if defined(__aarch64__)
  out.Set("arch", "arm64");
#elif defined(__x86_64__)
  out.Set("arch", "x64");
#else
  out.Set("arch", "other");
#endif
  return out;
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  // Freed by N-API with the environment, after the cleanup hook has closed every watch.
  auto* state = new AddonState();
  env.SetInstanceData(state);
  if (!exit_watches_attach(env, &state->exit_watches)) {
    Napi::Error::New(env, "pidfence native: could not register the environment cleanup hook")
        .ThrowAsJavaScriptException();
    return exports;
  }
  exports.Set("setErrorClass", Napi::Function::New(env, set_error_class));
  exports.Set("readProcessStat", Napi::Function::New(env, read_process_stat));
  exports.Set("bootId", Napi::Function::New(env, boot_id));
  exports.Set("bootClockMs", Napi::Function::New(env, boot_clock));
  exports.Set("captureIdentity", Napi::Function::New(env, capture_identity));
  exports.Set("capabilities", Napi::Function::New(env, capabilities));
  exports.Set("signalVerified", Napi::Function::New(env, signal_verified_entry));
  exports.Set("exitWatchStart", Napi::Function::New(env, exit_watch_start));
  exports.Set("exitWatchGroupSignal", Napi::Function::New(env, exit_watch_group_signal));
  exports.Set("exitWatchCancel", Napi::Function::New(env, exit_watch_cancel));
  exports.Set("cgroupRead", Napi::Function::New(env, cgroup_read));
  exports.Set("cgroupFreeze", Napi::Function::New(env, cgroup_freeze));
  exports.Set("cgroupSignalMembers", Napi::Function::New(env, cgroup_signal_members));
  exports.Set("cgroupKill", Napi::Function::New(env, cgroup_kill));
  exports.Set("cgroupRemove", Napi::Function::New(env, cgroup_remove));
  exports.Set("cgroupLearnName", Napi::Function::New(env, cgroup_learn_name));
  exports.Set("cgroupWatchStart", Napi::Function::New(env, cgroup_watch_start));
  exports.Set("buildInfo", Napi::Function::New(env, build_info));
  return exports;
}

}  // namespace

AddonState& addon_state(Napi::Env env) { return *env.GetInstanceData<AddonState>(); }

Napi::Object result_to_object(Napi::Env env, const Result& result) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", outcome_name(result.outcome));
  if (result.mismatch != Mismatch::none) out.Set("reason", mismatch_name(result.mismatch));
  if (result.mode != SignalMode::none) out.Set("mode", mode_name(result.mode));
  if (result.outcome == Outcome::failed) {
    const char* name = strerrorname_np(result.error);
    out.Set("errno", name != nullptr ? name : "EUNKNOWN");
  }
  return out;
}

Napi::Value args_type_error(Napi::Env env, const char* usage) {
  const std::string message = std::string("pidfence native: bad arguments to ") + usage +
                              " (this is a bug: lib/native validates before calling)";
  const Napi::FunctionReference& error_class = addon_state(env).error_class;
  if (error_class.IsEmpty()) {
    Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  } else {
    Napi::Object error =
        error_class.New({Napi::String::New(env, message), Napi::String::New(env, "ERR_PIDFENCE_NATIVE_ARGS")});
    if (!env.IsExceptionPending()) Napi::Error(env, error).ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

bool args_pid(const Napi::Value& value, pid_t* out) {
  if (!value.IsNumber()) return false;
  const double number = value.As<Napi::Number>().DoubleValue();
  if (!(number >= 1 && number <= kPidMax) || number != static_cast<double>(static_cast<pid_t>(number))) {
    return false;
  }
  *out = static_cast<pid_t>(number);
  return true;
}

// Strings are copied into stack buffers (napi_get_value_string_utf8), never std::string:
// no allocation on the signalling path. A value longer than the buffer is refused.
namespace {

bool string_into(const Napi::Value& value, char* buffer, size_t size, size_t* length) {
  if (!value.IsString()) return false;
  if (napi_get_value_string_utf8(value.Env(), value, buffer, size, length) != napi_ok) return false;
  return *length < size - 1;  // a full buffer means the text was cut
}

bool decimal_u64_parse(const char* text, size_t length, uint64_t* out) {
  if (length == 0 || length > 20) return false;
  uint64_t result = 0;
  for (size_t i = 0; i < length; ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (UINT64_MAX - digit) / 10u) return false;
    result = result * 10u + digit;
  }
  *out = result;
  return true;
}

}  // namespace

bool args_decimal_u64(const Napi::Value& value, uint64_t* out) {
  char buffer[24];
  size_t length = 0;
  return string_into(value, buffer, sizeof buffer, &length) && decimal_u64_parse(buffer, length, out);
}

bool args_expected(const Napi::CallbackInfo& info, size_t first, Expected* out) {
  if (!args_pid(info[first], &out->pid) || !args_decimal_u64(info[first + 2], &out->start_ticks)) {
    return false;
  }
  size_t length = 0;
  if (!string_into(info[first + 1], expected_boot_id, sizeof expected_boot_id, &length) ||
      !boot_id_is_valid(expected_boot_id, static_cast<int>(length))) {
    return false;
  }
  out->boot_id = expected_boot_id;
  char ino[24];
  if (!string_into(info[first + 3], ino, sizeof ino, &length)) return false;
  out->has_pidfs_ino = length > 0;
  out->pidfs_ino = 0;
  return !out->has_pidfs_ino || decimal_u64_parse(ino, length, &out->pidfs_ino);
}

}  // namespace pidfence

Napi::Object pidfence_init(Napi::Env env, Napi::Object exports) { return pidfence::init(env, exports); }

NODE_API_MODULE(pidfence, pidfence_init)
