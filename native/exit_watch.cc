// Exit watches are kept in a table keyed by a small integer, not handed to JS as pointers:
// a late cancel() after the watch fired finds nothing and does nothing.
#include "exit_watch.h"

#include <cerrno>
#include <cstdint>
#include <memory>
#include <unistd.h>
#include <unordered_map>
#include <uv.h>

#include "addon_args.h"
#include "pidfd.h"

namespace pidfence {
namespace {

struct Watch {
  uint32_t id;
  int fd;
  // Held watches keep their pidfd after the exit fired, so the group the pidfd proved can still
  // be signalled (its members may outlive the leader). Released only by exitWatchRelease.
  bool hold;
  uv_poll_t poll;
  Napi::Env env;
  Napi::FunctionReference callback;
  std::unique_ptr<Napi::AsyncContext> context;
};

// Only the JS thread touches the table (all entry points and uv callbacks run on it).
std::unordered_map<uint32_t, Watch*> watches;
uint32_t next_watch_id = 1;

void on_poll_closed(uv_handle_t* handle) {
  Watch* watch = static_cast<Watch*>(handle->data);
  (void)close(watch->fd);  // a pidfd has nothing to flush; Linux releases it even on EINTR
  delete watch;
}

void watch_release(Watch* watch) {
  watches.erase(watch->id);
  // uv_poll_stop only fails for a handle that is not a poll handle; ours always is.
  (void)uv_poll_stop(&watch->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&watch->poll), on_poll_closed);
}

void on_readable(uv_poll_t* handle, int status, int /*events*/) {
  Watch* watch = static_cast<Watch*>(handle->data);
  Napi::Env env = watch->env;
  Napi::HandleScope scope(env);
  Napi::Function callback = watch->callback.Value();
  std::unique_ptr<Napi::AsyncContext> context = std::move(watch->context);
  if (watch->hold) {
    (void)uv_poll_stop(&watch->poll);  // a readable pidfd stays readable: stop, keep the fd
  } else {
    watch_release(watch);
  }
  callback.MakeCallback(env.Global(), {Napi::String::New(env, status < 0 ? "error" : "exited")},
                        *context);
  if (env.IsExceptionPending()) {
    // Our own JS callback only settles a promise; if it threw, that is a bug worth surfacing.
    Napi::Error error = env.GetAndClearPendingException();
    napi_fatal_exception(env, error.Value());
  }
}

}  // namespace

Napi::Value exit_watch_start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Expected expected{};
  if (!args_expected(info, 0, &expected) || !info[4].IsFunction() || !info[5].IsBoolean()) {
    return args_type_error(env, "exitWatchStart(pid, bootId, startTicks, pidfsIno, callback, hold)");
  }
  int fd = -1;
  const Result verdict = pidfd_open_verified(expected, false, &fd);
  if (verdict.outcome != Outcome::verified) return result_to_object(env, verdict);

  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    (void)close(fd);
    return args_type_error(env, "no event loop for this environment");
  }
  auto* watch = new Watch{next_watch_id++, fd, info[5].As<Napi::Boolean>().Value(), {}, env,
                          Napi::Persistent(info[4].As<Napi::Function>()),
                          std::make_unique<Napi::AsyncContext>(env, "pidfence:exitWatch")};
  int rc = uv_poll_init(loop, &watch->poll, fd);
  if (rc == 0) {
    watch->poll.data = watch;
    rc = uv_poll_start(&watch->poll, UV_READABLE, on_readable);
    if (rc != 0) {
      watches[watch->id] = watch;
      watch_release(watch);
    }
  } else {
    (void)close(fd);
    delete watch;
  }
  if (rc != 0) {
    Result failed{Outcome::failed, Mismatch::none, SignalMode::none, -rc};
    return result_to_object(env, failed);
  }
  watches[watch->id] = watch;
  Napi::Object out = Napi::Object::New(env);
  out.Set("outcome", "watching");
  out.Set("id", Napi::Number::New(env, watch->id));
  return out;
}

Napi::Value exit_watch_group_signal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() || !info[1].IsNumber()) return args_type_error(env, "exitWatchGroupSignal(id, signo)");
  const int signo = info[1].As<Napi::Number>().Int32Value();
  if (signo < 0 || signo > 64) return args_type_error(env, "exitWatchGroupSignal: signo out of range");
  const auto found = watches.find(info[0].As<Napi::Number>().Uint32Value());
  Result result{Outcome::unsupported, Mismatch::none, SignalMode::none, 0};
  if (found == watches.end()) {
    result.outcome = Outcome::failed;
    result.error = EBADF;
  } else {
    result = pidfd_group_signal_held(found->second->fd, signo);
  }
  return result_to_object(env, result);
}

Napi::Value exit_watch_cancel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) return args_type_error(env, "exitWatchCancel(id)");
  const auto found = watches.find(info[0].As<Napi::Number>().Uint32Value());
  if (found == watches.end()) return Napi::Boolean::New(env, false);
  watch_release(found->second);
  return Napi::Boolean::New(env, true);
}

}  // namespace pidfence
