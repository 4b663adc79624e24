/* A thread locking a pshared mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "pshared"
#include "mutex_starve_kinds.h"
