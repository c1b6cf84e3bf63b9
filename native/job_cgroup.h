// A job's cgroup (docs/decisions/0180): found by its id under the runner's subtree, never by its
// name alone, so a cgroup re-created under the same name (a new id) is never written to. Events
// (populated, frozen), freeze, members signalled through pidfds proved to be in it, cgroup.kill,
// removal. Every call re-finds the directory and re-checks the id: a name remembered from an
// earlier find is only a guess, proved by the id before use (docs/decisions/0420).
#ifndef PIDFENCE_JOB_CGROUP_H
#define PIDFENCE_JOB_CGROUP_H

#include <cstdint>

#include "pidfd.h"

namespace pidfence {

enum class CgroupOutcome {
  ok,
  gone,         // no cgroup with this id under the subtree (removed: it was empty then)
  busy,         // rmdir of a populated cgroup
  unsupported,  // this kernel lacks the file (cgroup.kill before 5.14, cgroup.freeze before 5.2)
  failed,       // an unexpected errno
};

struct CgroupResult {
  CgroupOutcome outcome;
  int error;  // errno when outcome == failed
};

struct CgroupEvents {
  bool populated;
  bool frozen;
};

// Opens the cgroup whose directory inode is `id` among the direct children of `subtree`; the
// returned descriptor is checked again after open (a rename or re-creation in between: gone).
CgroupResult job_cgroup_open(const char* subtree, uint64_t id, UniquePidfd* out);

CgroupResult job_cgroup_events(int dir, CgroupEvents* out);
CgroupResult job_cgroup_freeze(int dir, bool frozen);
// How a member was proved to be in the cgroup before it was signalled through its pidfd.
enum class CgroupProof {
  pidfd_info,  // PIDFD_GET_INFO's cgroupid of the pidfd (Linux 6.13); listing where it is missing
  listing,     // listed in cgroup.procs after the pidfd was opened, and not exited after that read
};

// cgroup.procs, each member opened as a pidfd and proved to be in cgroup `id` before `signo` goes
// through that pidfd. *proof is the proof to try first; on return, the one that was used last.
// *signalled counts the processes reached.
CgroupResult job_cgroup_signal_members(int dir, uint64_t id, int signo, CgroupProof* proof, uint32_t* signalled);
CgroupResult job_cgroup_kill(int dir);
// rmdir of the child of `subtree` whose inode is `id` (busy while populated).
CgroupResult job_cgroup_remove(const char* subtree, uint64_t id);
// Remembers `name` as the name of the child of `subtree` whose inode is `id`, once the directory
// under that name is proved to have that id (docs/decisions/0443): the cgroup's creator knows its
// name, so its first find need not list the subtree. gone: no such directory with that id.
CgroupResult job_cgroup_learn_name(const char* subtree, uint64_t id, const char* name);
// An inotify descriptor (non-blocking) watching `dir`'s cgroup.events for changes.
CgroupResult job_cgroup_watch_events(int dir, UniquePidfd* out);

const char* cgroup_outcome_name(CgroupOutcome outcome);

}  // namespace pidfence

#endif
