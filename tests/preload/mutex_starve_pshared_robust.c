/* A thread locking a pshared robust mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "pshared_robust"
#include "mutex_starve_kinds.h"
