// Argument decoding for the addon's entry points. TypeScript validates everything first
// (lib/native); these checks only stop a bug from reaching the kernel with garbage.
#ifndef PIDFENCE_ADDON_ARGS_H
#define PIDFENCE_ADDON_ARGS_H

#include <napi.h>

#include "pidfd.h"

namespace pidfence {

// Throws the project's error class (handed over by setErrorClass) and returns undefined.
Napi::Value args_type_error(Napi::Env env, const char* usage);

// Reads (pid, bootId, startTicks, pidfsIno | "") starting at info[first]. The boot id string is
// copied into a thread-local buffer that `out->boot_id` points to: valid until the next call on
// this thread, so only for the synchronous entry point that decoded it.
bool args_expected(const Napi::CallbackInfo& info, size_t first, Expected* out);

bool args_pid(const Napi::Value& value, pid_t* out);
bool args_decimal_u64(const Napi::Value& value, uint64_t* out);

}  // namespace pidfence

#endif
