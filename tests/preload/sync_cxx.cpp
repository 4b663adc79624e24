// C++20 synchronization under goshim: std::thread, std::mutex,
// std::recursive_mutex, std::timed_mutex, std::shared_mutex,
// std::condition_variable (wait, wait_for, wait_until on system_clock and
// steady_clock), std::counting_semaphore, std::latch, std::barrier,
// std::atomic::wait/notify, std::async/std::future, function-local statics
// and thread_local. libstdc++ 12 reaches the kernel through pthread_* for
// the mutexes and condition variables and through syscall(SYS_futex)
// (non-private operations) for atomic waits, semaphores, latch, barrier,
// futures and static guards; all of them must park goroutines.
#if !__has_include(<barrier>)
// Debian 11: libstdc++ 10 has no <barrier>, <latch> or <semaphore>.
#include <cstdio>
int main() {
  std::fprintf(stderr, "needs C++20 <barrier>, <latch>, <semaphore> (libstdc++ 11 or later)\n");
  return 77;
}
#else
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <latch>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <thread>
#include <vector>

extern "C" {
#include "common.h"
}

using namespace std::chrono_literals;

static thread_local int tl_value = 0;

static int expensive_static() {
  static int v = [] {
    std::this_thread::yield();
    return 42;
  }();
  return v;
}

int main() {
  const int n = env_int("NTHREADS", 200);

  // std::mutex + std::condition_variable: a bounded queue.
  {
    std::mutex mu;
    std::condition_variable not_empty, not_full;
    std::vector<int> q;
    long sum = 0, want = 0;
    std::vector<std::thread> ts;
    for (int p = 0; p < n; p++) {
      want += (long)p * 100 + 4950;
      ts.emplace_back([&, p] {
        for (int i = 0; i < 100; i++) {
          std::unique_lock l(mu);
          not_full.wait(l, [&] { return q.size() < 8; });
          q.push_back(p + i);
          not_empty.notify_one();
        }
      });
    }
    std::thread consumer([&] {
      for (int i = 0; i < n * 100; i++) {
        std::unique_lock l(mu);
        not_empty.wait(l, [&] { return !q.empty(); });
        sum += q.back();
        q.pop_back();
        not_full.notify_all();
      }
    });
    check_kernel_threads("condition variable producers alive");
    for (auto& t : ts) t.join();
    consumer.join();
    CHECK_EQ(sum, want);
  }
  std::printf("mutex + condition_variable queue: ok\n");

  // wait_for / wait_until on both clocks (time out, then get notified).
  {
    std::mutex mu;
    std::condition_variable cv;
    bool flag = false;
    std::unique_lock l(mu);
    CHECK(cv.wait_for(l, 20ms) == std::cv_status::timeout, "wait_for should time out");
    CHECK(cv.wait_until(l, std::chrono::steady_clock::now() + 20ms) == std::cv_status::timeout,
          "steady wait_until should time out");
    CHECK(cv.wait_until(l, std::chrono::system_clock::now() + 20ms) == std::cv_status::timeout,
          "system wait_until should time out");
    std::thread t([&] {
      std::lock_guard g(mu);
      flag = true;
      cv.notify_one();
    });
    CHECK(cv.wait_until(l, std::chrono::steady_clock::now() + 60s, [&] { return flag; }),
          "steady wait_until with a predicate");
    flag = false;
    l.unlock();
    t.join();
    std::thread t2([&] {
      std::lock_guard g(mu);
      flag = true;
      cv.notify_all();
    });
    l.lock();
    CHECK(cv.wait_until(l, std::chrono::system_clock::now() + 60s, [&] { return flag; }),
          "system wait_until with a predicate");
    l.unlock();
    t2.join();
  }
  std::printf("condition_variable timeouts on both clocks: ok\n");

  // recursive_mutex, timed_mutex, shared_mutex.
  {
    std::recursive_mutex rm;
    std::timed_mutex tm;
    std::shared_mutex sm;
    long c_rec = 0, c_timed = 0, c_shared = 0, readers_max = 0;
    std::atomic<long> readers{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++)
      ts.emplace_back([&, i] {
        for (int k = 0; k < 50; k++) {
          {
            std::lock_guard a(rm);
            std::lock_guard b(rm);
            c_rec++;
          }
          if (tm.try_lock_for(100ms)) {
            c_timed++;
            tm.unlock();
          } else {
            std::lock_guard a(tm);
            c_timed++;
          }
          if ((i + k) % 10 == 0) {
            std::unique_lock w(sm);
            CHECK_EQ(readers.load(), 0);
            c_shared++;
          } else {
            std::shared_lock r(sm);
            long now = ++readers;
            if (now > readers_max) readers_max = now;  // racy max: only a hint
            --readers;
          }
        }
      });
    for (auto& t : ts) t.join();
    long writes = 0;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < 50; k++) writes += (i + k) % 10 == 0;
    CHECK_EQ(c_rec, (long)n * 50);
    CHECK_EQ(c_timed, (long)n * 50);
    CHECK_EQ(c_shared, writes);
    std::timed_mutex held;
    held.lock();
    std::thread t([&] { CHECK(!held.try_lock_for(20ms), "try_lock_for should time out"); });
    t.join();
    held.unlock();
  }
  std::printf("recursive_mutex, timed_mutex, shared_mutex: ok\n");

  // counting_semaphore, latch, barrier (futex-based in libstdc++).
  {
    std::counting_semaphore<> sem(3);
    std::atomic<int> inside{0}, max_inside{0};
    std::latch done(n);
    int phase_count[5] = {};
    std::barrier bar(n, [&]() noexcept {});
    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++)
      ts.emplace_back([&] {
        for (int k = 0; k < 5; k++) {
          sem.acquire();
          int now = ++inside;
          int m = max_inside.load();
          while (now > m && !max_inside.compare_exchange_weak(m, now)) {
          }
          std::this_thread::yield();
          --inside;
          sem.release();
          __atomic_add_fetch(&phase_count[k], 1, __ATOMIC_RELAXED);
          bar.arrive_and_wait();
          CHECK_EQ(__atomic_load_n(&phase_count[k], __ATOMIC_RELAXED), n);
        }
        done.count_down();
      });
    check_kernel_threads("semaphore/barrier threads alive");
    done.wait();
    for (auto& t : ts) t.join();
    CHECK(max_inside.load() <= 3, "semaphore let %d in", max_inside.load());
  }
  std::printf("counting_semaphore, latch, barrier: ok\n");

  // atomic::wait/notify ping-pong and many waiters on one atomic.
  {
    std::atomic<int> turn{0};
    std::thread t([&] {
      for (int i = 0; i < 5000; i++) {
        turn.wait(0);
        turn.store(0);
        turn.notify_one();
      }
    });
    for (int i = 0; i < 5000; i++) {
      turn.store(1);
      turn.notify_one();
      turn.wait(1);
    }
    t.join();
    std::atomic<int> gate{0};
    std::atomic<int> passed{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++)
      ts.emplace_back([&] {
        gate.wait(0);
        ++passed;
      });
    gate.store(1);
    gate.notify_all();
    for (auto& th : ts) th.join();
    CHECK_EQ(passed.load(), n);
  }
  std::printf("atomic wait/notify: ok\n");

  // std::async / std::future, function-local statics, thread_local.
  {
    std::vector<std::future<long>> fs;
    for (int i = 0; i < n; i++)
      fs.push_back(std::async(std::launch::async, [i] {
        tl_value += i;  // each thread its own
        CHECK_EQ(expensive_static(), 42);
        return (long)tl_value;
      }));
    long sum = 0;
    for (auto& f : fs) sum += f.get();
    CHECK_EQ(sum, (long)n * (n - 1) / 2);
    std::promise<int> p;
    std::future<int> f = p.get_future();
    std::thread t([&] {
      std::this_thread::yield();
      p.set_value(7);
    });
    CHECK(f.wait_for(60s) == std::future_status::ready, "future not ready");
    CHECK_EQ(f.get(), 7);
    t.join();
    CHECK_EQ(tl_value, 0);
  }
  std::printf("async, future, statics, thread_local: ok\n");
  return 0;
}
#endif
