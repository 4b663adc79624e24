// __libc_start_main: main runs as G1 (DESIGN.md decision 1).
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>

#include "core/fork.hpp"
#include "core/proc.hpp"
#include "core/real.hpp"
#include "shim/attr.hpp"
#include "core/tls.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

using main_fn = int (*)(int, char**, char**);

main_fn program_main;

int goshim_main(int argc, char** argv, char** envp) {
  int saved_errno = errno;  // main starts with glibc's errno (0), not init's
  if (!runtime_init()) {
    errno = saved_errno;
    return program_main(argc, argv, envp);
  }
  errno = saved_errno;
  // pthread_exit in main unwinds to here (not into glibc's
  // __libc_start_call_main, which would end the kernel thread).
  uintptr_t t0 = tls::initial_tp();
  __pthread_unwind_buf_t ub;
  int not_first = _setjmp((struct __jmp_buf_tag*)ub.__cancel_jmp_buf);
  if (!not_first) {
    ub.__pad[0] = tls::get_cleanup_jmp_buf(t0);  // prev: glibc's own buffer
    ub.__pad[1] = nullptr;
    tls::set_cleanup_jmp_buf(t0, &ub);
    int r = program_main(argc, argv, envp);
    tls::set_cleanup_jmp_buf(t0, ub.__pad[0]);
    return r;  // glibc calls exit(r) on this G
  }
  thread_exit_landed();
}

// Resolves the real functions early, while the process is single-threaded,
// and registers the shim's own fork-child resets.
__attribute__((constructor(101))) void goshim_ctor() {
  real::resolve();
  register_fork_child_hook(attr::after_fork);
}

}  // namespace

GOSHIM_EXPORT int __libc_start_main(main_fn main, int argc, char** argv, void (*init)(void),
                                    void (*fini)(void), void (*rtld_fini)(void), void* stack_end) {
  program_main = main;
  return real::lazy::__libc_start_main()(goshim_main, argc, argv, init, fini, rtld_fini, stack_end);
}
