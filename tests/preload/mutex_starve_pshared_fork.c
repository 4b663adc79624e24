/* A thread locking a pshared fork mutex in a loop keeps no waiter out (mutex_starve_kinds.h). */
#define KIND "pshared_fork"
#include "mutex_starve_kinds.h"
