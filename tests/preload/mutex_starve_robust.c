/* A thread locking a robust mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "robust"
#include "mutex_starve_kinds.h"
