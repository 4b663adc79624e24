/* A thread locking a robust priority-inheritance mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "robust_pi"
#include "mutex_starve_kinds.h"
