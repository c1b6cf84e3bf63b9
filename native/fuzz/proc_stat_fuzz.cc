// libFuzzer harness for proc_stat_parse (native/proc_stat.cc; design/architecture §3). Every input is
// also read by a small, independent reference below; any disagreement traps:
//  - the parser accepts a line the reference calls malformed, or reports other values;
//  - the parser refuses a line the reference calls canonical (what a kernel writes).
// Build and run: native/fuzz/run.sh.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../proc_stat.h"

namespace {

constexpr long long kPidMax = 4194304;  // PID_MAX_LIMIT: the largest pid a kernel hands out

// A decimal integer token: optional '-' (when allowed), then digits only, fitting in 64 bits.
// `canonical` additionally means no leading zeros, no "-0", and at most 18 digits.
struct Number {
  bool ok = false;
  bool canonical = false;
  bool negative = false;
  unsigned __int128 magnitude = 0;
};

Number read_number(const std::string& token, bool allow_negative) {
  Number n;
  size_t i = 0;
  if (allow_negative && !token.empty() && token[0] == '-') {
    n.negative = true;
    i = 1;
  }
  const size_t digits = token.size() - i;
  if (digits == 0) return n;
  for (size_t j = i; j < token.size(); ++j) {
    if (token[j] < '0' || token[j] > '9') return n;
    n.magnitude = n.magnitude * 10 + static_cast<unsigned>(token[j] - '0');
    if (n.magnitude > (static_cast<unsigned __int128>(1) << 64)) return n;  // far out of range
  }
  const unsigned __int128 limit = n.negative || allow_negative ? static_cast<unsigned __int128>(INT64_MAX)
                                                               : static_cast<unsigned __int128>(UINT64_MAX);
  if (n.magnitude > limit) return n;
  n.ok = true;
  n.canonical = digits <= 18 && (digits == 1 || token[i] != '0') && !(n.negative && n.magnitude == 0);
  return n;
}

// "-0" reads as 0: the value, not the spelling, is what must be in range.
bool in_pid_range(const Number& n, bool allow_zero) {
  return n.ok && (!n.negative || n.magnitude == 0) && n.magnitude <= kPidMax && (allow_zero || n.magnitude >= 1);
}

// The value -1, however it is spelled ("-1", "-01").
bool is_minus_one(const Number& n) { return n.ok && n.negative && n.magnitude == 1; }

struct Reference {
  bool well_formed = false;  // the parser may accept it, and must then report these values
  bool canonical = false;    // the parser must accept it
  pidfence::ProcStat stat{};
};

// "<pid> (<comm>) <state> <field 4> ... <field 22> <more...>", comm anchored on the LAST ')'.
Reference reference_parse(const std::string& line) {
  Reference ref;
  const size_t open = line.find(" (");
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open + 2) return ref;
  const Number pid = read_number(line.substr(0, open), false);
  if (!in_pid_range(pid, false)) return ref;

  // After the last ')': " S f4 f5 ... f22 " and then anything.
  // Twenty tokens (state, fields 4..22), each after one space and ended by a space: the kernel
  // always writes more fields after 22, so a line that ends there was cut.
  std::vector<std::string> tokens;
  size_t pos = close + 1;
  for (int i = 0; i < 20; ++i) {
    if (pos >= line.size() || line[pos] != ' ') return ref;
    const size_t next = line.find(' ', pos + 1);
    if (next == std::string::npos) return ref;
    tokens.push_back(line.substr(pos + 1, next - pos - 1));
    pos = next;
  }
  const std::string& state = tokens[0];
  if (state.size() != 1 || std::strchr("RSDZTtWXxKPI", state[0]) == nullptr || state[0] == '\0') return ref;

  bool canonical = pid.canonical;
  Number fields[23];
  for (int field = 4; field <= 22; ++field) {
    fields[field] = read_number(tokens[static_cast<size_t>(field - 3)], field != 22);
    if (!fields[field].ok) return ref;
    canonical = canonical && fields[field].canonical;
  }
  // A task being released by its reaper (state Z or X) prints -1 for its group and session.
  const bool released = (state[0] == 'Z' || state[0] == 'X') && is_minus_one(fields[5]) && is_minus_one(fields[6]);
  if (!in_pid_range(fields[4], true)) return ref;
  for (int field : {5, 6}) {
    if (!released && !in_pid_range(fields[field], true)) return ref;
  }

  ref.well_formed = true;
  ref.canonical = canonical;
  ref.stat.pid = static_cast<pid_t>(pid.magnitude);
  ref.stat.state = state[0];
  ref.stat.ppid = static_cast<pid_t>(fields[4].magnitude);
  ref.stat.pgid = released ? -1 : static_cast<pid_t>(fields[5].magnitude);
  ref.stat.sid = released ? -1 : static_cast<pid_t>(fields[6].magnitude);
  ref.stat.start_ticks = static_cast<uint64_t>(fields[22].magnitude);
  return ref;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy, so AddressSanitizer sees any read past the line.
  std::unique_ptr<char[]> line(new char[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(line.get(), data, size);
  pidfence::ProcStat out;
  std::memset(&out, 0xa5, sizeof out);

  const bool accepted = pidfence::proc_stat_parse(line.get(), size, &out);
  const Reference ref = reference_parse(std::string(reinterpret_cast<const char*>(data), size));

  if (accepted) {
    if (!ref.well_formed) __builtin_trap();  // accepted a malformed line
    if (out.pid != ref.stat.pid || out.state != ref.stat.state || out.ppid != ref.stat.ppid ||
        out.pgid != ref.stat.pgid || out.sid != ref.stat.sid || out.start_ticks != ref.stat.start_ticks) {
      __builtin_trap();  // read the wrong fields (e.g. anchored on a ')' that is not the last)
    }
  } else if (ref.canonical) {
    __builtin_trap();  // refused a line the kernel could have written
  }
  return 0;
}
