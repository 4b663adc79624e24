/* A module with initial-exec TLS (initial value 4321) whose constructor
 * hands a task to a thread that existed before the dlopen and waits for
 * the answer: the task reads this module's TLS in that thread. The
 * constructor also reads the TLS itself (in the loading thread). The
 * program (dlopen_ctor_handoff) passes, in MOD_CTOR_HANDOFF_SLOT, the
 * address of a struct it reads back: its hand-off function, and the two
 * values seen. */
#include <stdlib.h>

__thread int handoff_ie __attribute__((tls_model("initial-exec"))) = 4321;

static int read_ie(void) { return handoff_ie; }

struct handoff {
  int (*run_on_old_thread)(int (*task)(void)); /* the program's: runs task there */
  int seen_by_old_thread;
  int seen_by_loader;
};

__attribute__((constructor)) static void ctor(void) {
  const char *s = getenv("MOD_CTOR_HANDOFF_SLOT");
  struct handoff *h = s ? (struct handoff *)strtoul(s, NULL, 16) : NULL;
  if (!h) return;
  h->seen_by_loader = read_ie();
  h->seen_by_old_thread = h->run_on_old_thread(read_ie);
}
