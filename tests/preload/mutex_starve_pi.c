/* A thread locking a priority-inheritance mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "pi"
#include "mutex_starve_kinds.h"
