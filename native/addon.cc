// Module registration and argument glue only; the kernel-facing logic lives in
// proc_stat.cc, boot_id.cc, pidfd.cc and exit_watch.cc. No C++ exceptions are compiled in.
#include <napi.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "addon_args.h"
#include "boot_id.h"
#include "exit_watch.h"
#include "pidfd.h"
#include "proc_stat.h"

#define PIDFENCE_STRINGIFY_INNER(x) #x
#define PIDFENCE_STRINGIFY(x) PIDFENCE_STRINGIFY_INNER(x)

namespace pidfence {
namespace {

constexpr pid_t kPidMax = 4194304;  // PID_MAX_LIMIT on 64-bit Linux
Napi::FunctionReference error_class;
thread_local char expected_boot_id[kBootIdLength + 1];

Napi::Object errno_object(Napi::Env env, const char* status, int error) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("status", status);
  const char* name = strerrorname_np(error);
  out.Set("errno", name != nullptr ? name : "EUNKNOWN");
  return out;
}

Napi::Value set_error_class(const Napi::CallbackInfo& info) {
  if (!info[0].IsFunction()) {
    Napi::TypeError::New(info.Env(), "setErrorClass(cls)").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  error_class = Napi::Persistent(info[0].As<Napi::Function>());
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
      out.Set("status", "gone");
      return out;
    }
    case ProcStatRead::failed:
      return errno_object(env, "error", error);
    case ProcStatRead::ok:
      break;
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("status", "ok");
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
  out.Set("status", "ok");
  out.Set("bootId", id);
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
  out.Set("outcome", "verified");
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

// signalVerified(pid, bootId, startTicks, pidfsIno | "", signo, group, forceGroupFallback)
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
  return result_to_object(env, signal_verified(expected, signo, group, fallback));
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
  exports.Set("setErrorClass", Napi::Function::New(env, set_error_class));
  exports.Set("readProcessStat", Napi::Function::New(env, read_process_stat));
  exports.Set("bootId", Napi::Function::New(env, boot_id));
  exports.Set("captureIdentity", Napi::Function::New(env, capture_identity));
  exports.Set("capabilities", Napi::Function::New(env, capabilities));
  exports.Set("signalVerified", Napi::Function::New(env, signal_verified_entry));
  exports.Set("exitWatchStart", Napi::Function::New(env, exit_watch_start));
  exports.Set("exitWatchCancel", Napi::Function::New(env, exit_watch_cancel));
  exports.Set("buildInfo", Napi::Function::New(env, build_info));
  return exports;
}

}  // namespace

Napi::Object result_to_object(Napi::Env env, const Result& result) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("outcome", outcome_name(result.outcome));
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

bool args_decimal_u64(const Napi::Value& value, uint64_t* out) {
  if (!value.IsString()) return false;
  const std::string text = value.As<Napi::String>().Utf8Value();
  if (text.empty() || text.size() > 20) return false;
  uint64_t result = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (UINT64_MAX - digit) / 10u) return false;
    result = result * 10u + digit;
  }
  *out = result;
  return true;
}

bool args_expected(const Napi::CallbackInfo& info, size_t first, Expected* out) {
  if (!args_pid(info[first], &out->pid) || !info[first + 1].IsString() ||
      !args_decimal_u64(info[first + 2], &out->start_ticks) || !info[first + 3].IsString()) {
    return false;
  }
  const std::string boot = info[first + 1].As<Napi::String>().Utf8Value();
  if (!boot_id_is_valid(boot.c_str(), static_cast<int>(boot.size()))) return false;
  std::memcpy(expected_boot_id, boot.c_str(), kBootIdLength + 1);
  out->boot_id = expected_boot_id;
  const std::string ino = info[first + 3].As<Napi::String>().Utf8Value();
  out->has_pidfs_ino = !ino.empty();
  out->pidfs_ino = 0;
  return !out->has_pidfs_ino || args_decimal_u64(info[first + 3], &out->pidfs_ino);
}

}  // namespace pidfence

Napi::Object pidfence_init(Napi::Env env, Napi::Object exports) { return pidfence::init(env, exports); }

NODE_API_MODULE(pidfence, pidfence_init)
