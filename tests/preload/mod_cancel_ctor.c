/* A module with initial-exec and dynamic TLS whose constructor is a
 * cancellation point: loaded with dlopen by dlopen_cancel_ctor, which
 * passes the address of its table of this module's functions in
 * MOD_CANCEL_CTOR_SLOT (the loader's lock stays held once a constructor is
 * canceled: dlsym would wait for ever). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__thread int ie_var __attribute__((tls_model("initial-exec"))) = 1234;
__thread int gd_var = 5678;
static int ctor_runs;

static int get_ie(void) { return ie_var; }
static void set_ie(int v) { ie_var = v; }
static int get_gd(void) { return gd_var; }
static int get_ctor_runs(void) { return ctor_runs; }

struct mod_fns {
  int (*get_ie)(void);
  void (*set_ie)(int);
  int (*get_gd)(void);
  int (*ctor_runs)(void);
};

__attribute__((constructor)) static void ctor(void) {
  const char *s = getenv("MOD_CANCEL_CTOR_SLOT");
  struct mod_fns *f = s ? (struct mod_fns *)strtoul(s, NULL, 16) : NULL;
  if (f) {
    f->get_ie = get_ie;
    f->set_ie = set_ie;
    f->get_gd = get_gd;
    f->ctor_runs = get_ctor_runs;
  }
  ctor_runs++;
  pthread_testcancel();
  ctor_runs++; /* not reached when the loading thread's cancellation is pending */
}
