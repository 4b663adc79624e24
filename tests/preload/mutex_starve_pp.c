/* A thread locking a priority-protect mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "pp"
#include "mutex_starve_kinds.h"
