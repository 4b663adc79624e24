/* mutex_pi_cancel with a process-shared PTHREAD_PRIO_INHERIT mutex (in
 * MAP_SHARED memory): waiters cancelled asynchronously, then the mutex
 * used on, a SCHED_FIFO waiter (when permitted) among the waiters. A
 * runtime that registers waiters of process-shared PI mutexes must leave
 * no record of a cancelled one behind. */
#define PI_PSHARED 1
#include "mutex_pi_cancel.c"
