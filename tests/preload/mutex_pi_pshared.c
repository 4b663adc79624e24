/* Priority inheritance with process-shared PTHREAD_PRIO_INHERIT mutexes
 * (in MAP_SHARED memory): mutex_pi_boost's phases (one CPU; a SCHED_OTHER
 * owner L, a SCHED_FIFO 10 thread M computing, a SCHED_FIFO 30 waiter H:
 * H gets the mutex while M spins, directly, through a chain of two
 * mutexes, and L back at its own priority once a timed-out H left), the
 * owner being a thread of this process. Then phase "other process": a
 * forked child owns the mutex while H waits; H gets it once the child
 * unlocks (natively the kernel raises the child too; not checked).
 * Exit 77 (SKIP) when the process cannot be pinned or SCHED_FIFO is not
 * permitted. */
#define PI_PSHARED 1
#include "mutex_pi_boost.c"
