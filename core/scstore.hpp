// sc_store: a sequentially consistent store, written as an atomic exchange.
//
// Use it for every seq_cst store (never `x.store(v)`, `x.store(v,
// seq_cst)` or `__atomic_store_n(p, v, __ATOMIC_SEQ_CST)`): goshim's
// store-then-load hand-shakes ([S] then [L] in the comments: the releaser
// stores the state and reads the waiter count, the waiter counts itself
// and reads the state, so one of them sees the other) need the store
// ordered before the later seq_cst load of another word.
//
// C++ and the hardware give that to a plain seq_cst store (x86-64: xchg;
// aarch64: stlr, which ARMv8 orders before a later ldar). qemu-user does
// not: qemu-aarch64 7.2 on an x86-64 host translates stlr as a full fence
// then a plain store, and ldar as a plain load then a fence, so a load
// after a store-release may be served before the store leaves the host's
// store buffer (issue 17: sync_foreign hung 1 run in 8 at
// GOSHIM_MAXPROCS=1 under qemu: a foreign thread asleep as an rwlock
// writer on a lock that was free, the unlocking goroutine having read the
// writer count 0; tests/emu/sb_litmus.c shows the reordering without
// goshim). An atomic read-modify-write is a locked instruction on the
// host, a full fence: the exchange keeps the order under emulation too.
// Cost: none on x86-64 (gcc's seq_cst store is the same xchg); on
// aarch64 an swpal (or ldaxr/stlxr) where an stlr would do.
#pragma once

#include <atomic>
#include <type_traits>

namespace goshim {

template <class T>
inline void sc_store(T* p, std::type_identity_t<T> v) {
  (void)__atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

template <class T>
inline void sc_store(std::atomic<T>& a, std::type_identity_t<T> v) {
  (void)a.exchange(v, std::memory_order_seq_cst);
}

}  // namespace goshim
