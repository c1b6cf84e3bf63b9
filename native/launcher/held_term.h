// A TERM held back from a child that is still a copy of its parent (docs/decisions/0442). A child
// forked by a program that catches TERM (a shell with a trap) inherits that handler. A TERM that
// reaches it before its exec is taken by that handler, and the program the child then execs never
// sees it: the stop would wait out its whole grace for the KILL. So a TERM due to such a child is
// held, and sent once the child runs a program of its own.
#ifndef PIDFENCE_LAUNCHER_HELD_TERM_H
#define PIDFENCE_LAUNCHER_HELD_TERM_H

#include <stddef.h>
#include <sys/types.h>

/* More held at once are sent their TERM at once, as before this record. */
#define HELD_TERM_MAX 64
/* How often a caller with held TERMs looks again. */
#define HELD_TERM_TICK_MS 5

/* What tells one program image from the next: exec replaces the memory map. */
struct program_image {
  unsigned long long code_start, code_end, stack_start;
  int catches_term;
  int runnable; /* running or waiting for a CPU, not for anything else */
};

struct held_term {
  int pidfd; /* a duplicate, owned here */
  pid_t pid;
  struct program_image image;
  unsigned long long cpu_ns; /* its CPU time when held */
};

struct held_terms {
  struct held_term items[HELD_TERM_MAX];
  size_t count;
};

/*
 * Instead of a TERM to `pid`, proved by the caller's `pidfd`: 1 when the process is runnable, catches
 * TERM and has had less CPU time than a fork and an exec take, so its TERM is held here; 0 when the
 * caller sends it now (also whenever this cannot be told).
 */
int held_term_take(struct held_terms *held, int pidfd, pid_t pid);

/* 1 when a TERM to `pid` is held here. */
int held_term_holds(const struct held_terms *held, pid_t pid);

/* Sends TERM (then CONT) to each held process that now runs a program of its own; returns how many are still held. */
size_t held_terms_send_ready(struct held_terms *held);

/* Forgets every held TERM (the caller KILLs what is left, or it has ended). */
void held_terms_clear(struct held_terms *held);

#endif
