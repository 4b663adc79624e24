// The network poller: one epoll instance shared by the whole process.
//
// This header is the platform-independent contract the scheduler relies on:
//   netpoll_init       creates the instance and its break eventfd
//   netpoll(delay, q)  collects Gs made runnable by fd events; delay < 0
//                      blocks until an event or netpoll_break, 0 never
//                      blocks, > 0 waits at most delay ns
//   netpoll_break      wakes an M blocked in netpoll (idempotent until the
//                      sleeper wakes)
//   netpoll_any_waiters  whether any G waits on an fd (so polling is useful)
// The epoll backend is netpoll_epoll.cpp; per-fd poll descriptors and the
// fd table are in fdtable.hpp (the netpoller issue).
#pragma once

#include <stdint.h>

#include "core/gmp.hpp"

namespace goshim {

void netpoll_init();
bool netpoll_inited();
void netpoll(int64_t delay_ns, GQueue& q);
void netpoll_break();
bool netpoll_any_waiters();

// Adjusts the count of Gs waiting on fds (used by the fd layer).
void netpoll_adjust_waiters(int32_t delta);

// In a fork child: a new epoll instance (the parent's is shared with it).
void netpoll_after_fork();

// The epoll fd (for registering descriptors).
int netpoll_epfd();

}  // namespace goshim
