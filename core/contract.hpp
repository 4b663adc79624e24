// The contracts of HACKING.md's vocabulary, as checks. Each is live in the
// debug build (make debug: GOSHIM_DEBUG_BUILD) and compiles to nothing
// otherwise. Put the one that matches a function's contract comment at
// its top.
//
//   GOSHIM_ON_G0()          On g0: the M's scheduler stack and TLS
//   GOSHIM_ON_USER_G()      On user G: a goroutine's stack and TLS
//   GOSHIM_WITHOUT_P()      Without P: the M (if any) holds no P
//   GOSHIM_WITH_P()         the M holds a P (Any P / Owner P only)
//   GOSHIM_SIGNAL_SAFE()    Signal-safe: no Mutex may be taken until the
//                           end of the scope (core/lockrank.hpp)
//   GOSHIM_NO_LOCKS(where)  no runtime lock held (before a park, a context
//                           switch, a call into the program, a malloc)
//   GOSHIM_LOCK_HELD(addr, what)  Locks held: X (this M holds the ranked
//                           lock at addr)
#pragma once

#include "core/gmp.hpp"
#include "core/lockrank.hpp"
#include "core/rawlog.hpp"

#ifdef GOSHIM_DEBUG_BUILD
#define GOSHIM_ON_G0()                                                                \
  GOSHIM_CHECK(::goshim::getg() && ::goshim::getg()->is_g0(), "contract: not on g0 in " \
                                                                 __FILE__)
#define GOSHIM_ON_USER_G()                                                             \
  GOSHIM_CHECK(::goshim::getg() && !::goshim::getg()->is_g0() && ::goshim::getg()->m, \
               "contract: not on a user G in " __FILE__)
#define GOSHIM_WITHOUT_P()                                                             \
  GOSHIM_CHECK(!::goshim::getg() || !::goshim::getg()->m || !::goshim::getg()->m->p,  \
               "contract: the M holds a P in " __FILE__)
#define GOSHIM_WITH_P()                                                                \
  GOSHIM_CHECK(::goshim::getg() && ::goshim::getg()->m && ::goshim::getg()->m->p,     \
               "contract: the M holds no P in " __FILE__)
#define GOSHIM_SIGNAL_SAFE() ::goshim::SignalSafeScope goshim_signal_safe_scope_
#define GOSHIM_NO_LOCKS(where) ::goshim::lock_rank_assert_none(where)
#define GOSHIM_LOCK_HELD(addr, what) \
  GOSHIM_CHECK(::goshim::lock_rank_holds(addr), "contract: " what " not held in " __FILE__)
#else
#define GOSHIM_ON_G0() \
  do {                 \
  } while (0)
#define GOSHIM_ON_USER_G() \
  do {                     \
  } while (0)
#define GOSHIM_WITHOUT_P() \
  do {                     \
  } while (0)
#define GOSHIM_WITH_P() \
  do {                  \
  } while (0)
#define GOSHIM_SIGNAL_SAFE() \
  do {                       \
  } while (0)
#define GOSHIM_NO_LOCKS(where) \
  do {                         \
  } while (0)
#define GOSHIM_LOCK_HELD(addr, what) \
  do {                               \
  } while (0)
#endif
