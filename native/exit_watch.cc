// Exit watches of one environment (see ExitWatches). Each watch owns a verified pidfd and a
// uv_poll_t on the environment's own loop; the environment cleanup hook closes both before that
// loop is closed, so a worker can end or be terminated with watches pending.
#include "exit_watch.h"

#include <cerrno>
#include <cstdint>
#include <memory>
#include <uv.h>
#include <vector>

#include "addon_args.h"
#include "addon_state.h"
#include "pidfd.h"

namespace pidfence {

struct Watch {
  uint32_t id = 0;
  UniquePidfd fd;
  // Held watches keep their pidfd after the exit fired, so the group the pidfd proved can still
  // be signalled (its members may outlive the leader). Released only by exitWatchCancel or by
  // the environment's teardown.
  bool hold = false;
  // An inotify descriptor (a cgroup's events, docs/decisions/0180): every change is delivered as
  // "changed" and the watch stays until cancelled.
  bool repeat = false;
  ExitWatches* table = nullptr;
  uv_poll_t poll{};
  Napi::Env env{nullptr};
  Napi::FunctionReference callback;
  std::unique_ptr<Napi::AsyncContext> context;
};

namespace {

// Once the environment is torn down and its last poll handle closed, N-API may finish the
// teardown (and free the table with the rest of the instance data): nothing may touch the table
// after napi_remove_async_cleanup_hook.
void teardown_finish_if_idle(ExitWatches* table) {
  if (!table->tearing_down || table->open_handles != 0 || table->cleanup_hook == nullptr) return;
  napi_async_cleanup_hook_handle hook = table->cleanup_hook;
  table->cleanup_hook = nullptr;
  // Fails only for a null handle, which was excluded above.
  (void)napi_remove_async_cleanup_hook(hook);
}

void on_poll_closed(uv_handle_t* handle) {
  Watch* watch = static_cast<Watch*>(handle->data);
  ExitWatches* table = watch->table;
  delete watch;  // closes the pidfd
  table->open_handles--;
  teardown_finish_if_idle(table);
}

void watch_release(Watch* watch) {
  watch->table->by_id.erase(watch->id);
  // uv_poll_stop only fails for a handle that is not a poll handle; ours always is.
  (void)uv_poll_stop(&watch->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&watch->poll), on_poll_closed);
}

// Calls a watch's JS callback with its status. Plain N-API calls with every status looked at,
// not node-addon-api's wrappers: a worker can be terminated between the exit and this callback,
// and then N-API refuses to run JS (napi_pending_exception with nothing pending). That refusal
// is not an error of ours; node-addon-api would turn it into a fatal "napi_throw" abort.
void callback_deliver(napi_env env, napi_value callback, napi_async_context context, const char* status) {
  napi_value global = nullptr;
  napi_value argument = nullptr;
  if (napi_get_global(env, &global) != napi_ok ||
      napi_create_string_utf8(env, status, NAPI_AUTO_LENGTH, &argument) != napi_ok) {
    return;  // the environment is shutting down: nobody is left to tell
  }
  if (napi_make_callback(env, context, global, callback, 1, &argument, nullptr) == napi_ok) return;
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) != napi_ok || !pending) return;  // terminating
  // Our own JS callback only settles a promise; if it threw, that is a bug worth surfacing.
  napi_value error = nullptr;
  if (napi_get_and_clear_last_exception(env, &error) == napi_ok) (void)napi_fatal_exception(env, error);
}

void on_readable(uv_poll_t* handle, int status, int /*events*/) {
  Watch* watch = static_cast<Watch*>(handle->data);
  const napi_env env = watch->env;
  napi_handle_scope scope = nullptr;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;  // the teardown hook closes it
  napi_value callback = nullptr;
  if (napi_get_reference_value(env, watch->callback, &callback) != napi_ok) callback = nullptr;
  if (watch->repeat && status >= 0) {
    char drain[4096];
    while (read(watch->fd.get(), drain, sizeof drain) > 0) {
    }  // EAGAIN: drained; the events file is re-read by the callback
    if (callback != nullptr && watch->context != nullptr) callback_deliver(env, callback, *watch->context, "changed");
    (void)napi_close_handle_scope(env, scope);
    return;
  }
  std::unique_ptr<Napi::AsyncContext> context = std::move(watch->context);
  if (watch->hold) {
    (void)uv_poll_stop(&watch->poll);  // a readable pidfd stays readable: stop, keep the fd
  } else {
    watch_release(watch);
  }
  if (callback != nullptr && context != nullptr) {
    callback_deliver(env, callback, *context, status < 0 ? "error" : "exited");
  }
  (void)napi_close_handle_scope(env, scope);  // fails only for a scope that is not the innermost
}

// The environment is going away (process exit, worker end or terminate): its JS callbacks will
// never run, so their references are dropped now while N-API still serves this environment, and
// every poll handle is closed; the last close callback lets the teardown go on.
void on_environment_teardown(napi_async_cleanup_hook_handle /*hook*/, void* data) {
  ExitWatches* table = static_cast<ExitWatches*>(data);
  table->tearing_down = true;
  std::vector<Watch*> pending;
  pending.reserve(table->by_id.size());
  for (const auto& entry : table->by_id) pending.push_back(entry.second);
  for (Watch* watch : pending) {
    watch->callback.Reset();
    watch->context.reset();
    watch_release(watch);
  }
  teardown_finish_if_idle(table);
}

Napi::Value failed_object(Napi::Env env, int error) {
  return result_to_object(env, Result{Outcome::failed, Mismatch::none, SignalMode::none, error});
}

}  // namespace

bool exit_watches_attach(Napi::Env env, ExitWatches* watches) {
  return napi_add_async_cleanup_hook(env, on_environment_teardown, watches, &watches->cleanup_hook) == napi_ok;
}

Napi::Value exit_watch_start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Expected expected{};
  if (!args_expected(info, 0, &expected) || !info[4].IsFunction() || !info[5].IsBoolean()) {
    return args_type_error(env, "exitWatchStart(pid, bootId, startTicks, pidfsIno, callback, hold)");
  }
  ExitWatches& table = addon_state(env).exit_watches;
  if (table.tearing_down) return failed_object(env, ECANCELED);
  const bool hold = info[5].As<Napi::Boolean>().Value();
  UniquePidfd fd;
  // A hold exists to signal the process's group, so the process must lead one.
  const Result verdict = pidfd_open_verified(expected, hold, &fd);
  if (verdict.outcome != Outcome::verified) return result_to_object(env, verdict);

  return watch_start(env, std::move(fd), info[4].As<Napi::Function>(), hold, false);
}

Napi::Value watch_start(Napi::Env env, UniquePidfd fd, Napi::Function callback, bool hold, bool repeat) {
  ExitWatches& table = addon_state(env).exit_watches;
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    return args_type_error(env, "no event loop for this environment");
  }
  auto watch = std::make_unique<Watch>();
  watch->fd = std::move(fd);
  watch->hold = hold;
  watch->repeat = repeat;
  watch->table = &table;
  watch->env = env;
  watch->callback = Napi::Persistent(callback);
  watch->context = std::make_unique<Napi::AsyncContext>(env, "pidfence:exitWatch");
  const int init_rc = uv_poll_init(loop, &watch->poll, watch->fd.get());
  if (init_rc != 0) return failed_object(env, -init_rc);  // nothing registered on the loop yet

  Watch* started = watch.release();  // from here the close callback owns it
  started->id = table.next_id++;
  started->poll.data = started;
  table.open_handles++;
  table.by_id[started->id] = started;
  const int start_rc = uv_poll_start(&started->poll, UV_READABLE, on_readable);
  if (start_rc != 0) {
    watch_release(started);
    return failed_object(env, -start_rc);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", "watching");
  out.Set("id", Napi::Number::New(env, started->id));
  return out;
}

Napi::Value exit_watch_group_signal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() || !info[1].IsNumber()) return args_type_error(env, "exitWatchGroupSignal(id, signo)");
  const int signo = info[1].As<Napi::Number>().Int32Value();
  if (signo < 0 || signo > 64) return args_type_error(env, "exitWatchGroupSignal: signo out of range");
  const ExitWatches& table = addon_state(env).exit_watches;
  const auto found = table.by_id.find(info[0].As<Napi::Number>().Uint32Value());
  if (found == table.by_id.end()) return failed_object(env, EBADF);
  return result_to_object(env, pidfd_group_signal_held(found->second->fd.get(), signo));
}

Napi::Value exit_watch_cancel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) return args_type_error(env, "exitWatchCancel(id)");
  const ExitWatches& table = addon_state(env).exit_watches;
  const auto found = table.by_id.find(info[0].As<Napi::Number>().Uint32Value());
  if (found == table.by_id.end()) return Napi::Boolean::New(env, false);
  watch_release(found->second);
  return Napi::Boolean::New(env, true);
}

}  // namespace pidfence
