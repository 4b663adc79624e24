// C++20 standard-library threads and synchronization, as an ordinary
// program would use them (built with g++ -std=c++20 -pthread, knows nothing
// of goshim). Every section checks its own invariants; stdout holds only
// results that do not depend on scheduling (counts, sums), so it is the
// same natively and under goshim. While 300 threads are alive it prints
// "TASKS <kernel threads> THREADS <threads>" on stderr (tests/run_programs.sh
// checks M:N with it). Exits 77 (SKIP) where the standard library lacks
// the C++20 headers (libstdc++ 10, Debian 11).
#if !__has_include(<barrier>) || !__has_include(<latch>) || !__has_include(<semaphore>)
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
#include <deque>
#include <dirent.h>
#include <future>
#include <latch>
#include <list>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

static void check(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "threads_cxx: FAILED: %s\n", what);
    std::exit(1);
  }
}

// 1. Bounded queue: std::mutex and two std::condition_variable.
static void queue_section() {
  constexpr int producers = 8, consumers = 8, items = 5000, cap = 16;
  std::mutex mu;
  std::condition_variable not_full, not_empty;
  std::deque<long> q;
  long sum = 0, count = 0;
  std::vector<std::thread> ts;
  for (int p = 0; p < producers; p++)
    ts.emplace_back([&, p] {
      for (int i = 0; i < items; i++) {
        std::unique_lock lk(mu);
        not_full.wait(lk, [&] { return q.size() < cap; });
        q.push_back(long(p) * 100000 + i);
        not_empty.notify_one();
      }
    });
  for (int c = 0; c < consumers; c++)
    ts.emplace_back([&] {
      long s = 0, n = 0;
      for (;;) {
        std::unique_lock lk(mu);
        not_empty.wait(lk, [&] { return !q.empty(); });
        long v = q.front();
        q.pop_front();
        not_full.notify_one();
        if (v < 0) break;
        lk.unlock();
        s += v;
        n++;
      }
      std::lock_guard g(mu);
      sum += s;
      count += n;
    });
  for (int p = 0; p < producers; p++) ts[p].join();
  for (int c = 0; c < consumers; c++) {
    std::unique_lock lk(mu);
    not_full.wait(lk, [&] { return q.size() < cap; });
    q.push_back(-1);
    not_empty.notify_one();
  }
  for (int c = 0; c < consumers; c++) ts[producers + c].join();
  long want = 0;
  for (int p = 0; p < producers; p++)
    for (int i = 0; i < items; i++) want += long(p) * 100000 + i;
  check(count == long(producers) * items && sum == want, "queue: items lost or duplicated");
  std::printf("queue: %ld items, sum %ld\n", count, sum);
}

// 2. std::jthread, std::stop_token, std::stop_callback and
// std::condition_variable_any's stop-aware wait.
static void jthread_section() {
  constexpr int n = 32;
  std::mutex mu;
  std::condition_variable_any cv;
  std::condition_variable all_waiting;
  int waiting = 0, stopped = 0;
  std::atomic<int> callbacks{0};
  auto on_stop = [&] { callbacks.fetch_add(1); };
  {
    // Registered by main and destroyed after the threads are: each runs
    // once, in the thread that requests the stop (~jthread).
    std::list<std::stop_callback<decltype(on_stop)>> cbs;
    std::vector<std::jthread> ts;
    for (int i = 0; i < n; i++) {
      ts.emplace_back([&](std::stop_token st) {
        std::unique_lock lk(mu);
        waiting++;
        all_waiting.notify_one();
        bool r = cv.wait(lk, st, [] { return false; });
        check(!r && st.stop_requested(), "jthread: woke without a stop request");
        stopped++;
      });
      cbs.emplace_back(ts.back().get_stop_token(), on_stop);
    }
    std::unique_lock lk(mu);
    all_waiting.wait(lk, [&] { return waiting == n; });
    check(callbacks.load() == 0, "jthread: a stop callback ran early");
    lk.unlock();
    // ~jthread: request_stop() and join(), in reverse order.
    ts.clear();
  }
  if (stopped != n || callbacks.load() != n)
    std::fprintf(stderr, "jthread: stopped %d callbacks %d of %d\n", stopped, callbacks.load(), n);
  check(stopped == n && callbacks.load() == n, "jthread: a thread did not stop");
  std::printf("jthread: %d waiting threads stopped, %d stop callbacks\n", stopped, callbacks.load());
}

// 3. std::latch and std::barrier (completion function, arrive_and_drop).
static void barrier_section() {
  constexpr int n = 24, phases = 60;
  std::vector<long> contrib(n), phase_sums;
  int phase = 0;
  auto done = [&]() noexcept {
    long s = 0;
    for (long c : contrib) s += c;
    phase_sums.push_back(s);
    std::fill(contrib.begin(), contrib.end(), 0);
    phase++;
  };
  std::barrier bar(n, done);
  std::latch start(n + 1), finished(n);
  std::vector<std::thread> ts;
  for (int t = 0; t < n; t++)
    ts.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int p = 0; p < phases; p++) {
        // Half the threads leave the barrier after phase 40.
        if (t % 2 == 1 && p == 40) {
          bar.arrive_and_drop();
          break;
        }
        contrib[t] = long(t + 1) * (p + 1);
        bar.arrive_and_wait();
        check(phase == p + 1, "barrier: a thread passed before the completion ran");
      }
      finished.count_down();
    });
  start.count_down();
  finished.wait();
  for (auto &t : ts) t.join();
  long total = 0;
  for (long s : phase_sums) total += s;
  check(phase == phases, "barrier: wrong number of phases");
  std::printf("barrier: %d phases, phase 0 sum %ld, phase 59 sum %ld, total %ld\n", phase,
              phase_sums[0], phase_sums[59], total);
}

// 4. std::atomic<T>::wait/notify: a token passed around a ring, and a
// std::atomic_flag ping-pong.
static void atomic_wait_section() {
  constexpr int n = 16, laps = 400;
  std::atomic<int> turn{0};
  long passes[n] = {};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; i++)
    ts.emplace_back([&, i] {
      for (int lap = 0; lap < laps; lap++) {
        int cur;
        while ((cur = turn.load()) != i) turn.wait(cur);
        passes[i]++;
        turn.store((i + 1) % n);
        turn.notify_all();
      }
    });
  for (auto &t : ts) t.join();
  long total = 0;
  for (long p : passes) total += p;
  check(total == long(n) * laps, "atomic ring: wrong number of passes");

  std::atomic_flag flag;  // clear
  std::atomic<int> pings{0};
  constexpr int rounds = 20000;
  std::thread ponger([&] {
    for (int r = 0; r < rounds; r++) {
      flag.wait(false);  // until set
      pings.fetch_add(1);
      flag.clear();
      flag.notify_one();
    }
  });
  for (int r = 0; r < rounds; r++) {
    flag.test_and_set();
    flag.notify_one();
    flag.wait(true);  // until cleared
  }
  ponger.join();
  check(pings.load() == rounds, "atomic_flag: wrong number of pings");
  std::printf("atomic wait: ring of %d threads, %ld passes; atomic_flag %d round trips\n", n, total,
              pings.load());
}

// 5. std::this_thread::sleep_for and sleep_until never return early.
static void sleep_section() {
  constexpr int n = 64, each = 5;
  std::atomic<int> short_sleeps{0}, sleeps{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; i++)
    ts.emplace_back([&, i] {
      for (int k = 0; k < each; k++) {
        auto d = std::chrono::microseconds(500 * (1 + (i + k) % 8));
        auto t0 = std::chrono::steady_clock::now();
        if (k % 2)
          std::this_thread::sleep_for(d);
        else
          std::this_thread::sleep_until(t0 + d);
        if (std::chrono::steady_clock::now() - t0 < d) short_sleeps.fetch_add(1);
        sleeps.fetch_add(1);
      }
    });
  for (auto &t : ts) t.join();
  check(short_sleeps.load() == 0, "sleep: a sleep returned early");
  std::printf("sleep: %d sleeps by %d threads, none short\n", sleeps.load(), n);
}

// 6. std::counting_semaphore bounds a critical section; std::shared_mutex
// readers never see a half-done write.
static void semaphore_rwlock_section() {
  constexpr int n = 32, iters = 300;
  std::counting_semaphore<4> sem(4);
  std::atomic<int> inside{0}, max_inside{0};
  std::shared_mutex rw;
  long a = 0, b = 0;  // writers keep a == b
  std::atomic<long> torn{0}, reads{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; i++)
    ts.emplace_back([&, i] {
      for (int k = 0; k < iters; k++) {
        sem.acquire();
        int now = inside.fetch_add(1) + 1;
        int m = max_inside.load();
        while (now > m && !max_inside.compare_exchange_weak(m, now)) {
        }
        inside.fetch_sub(1);
        sem.release();
        if ((i + k) % 4 == 0) {
          std::unique_lock lk(rw);
          a++;
          std::this_thread::yield();
          b++;
        } else {
          std::shared_lock lk(rw);
          if (a != b) torn.fetch_add(1);
          reads.fetch_add(1);
        }
      }
    });
  for (auto &t : ts) t.join();
  check(max_inside.load() <= 4, "semaphore: more than 4 threads inside");
  check(torn.load() == 0, "shared_mutex: a reader saw a torn write");
  std::printf("semaphore: at most 4 inside; shared_mutex: %ld reads, %ld writes, none torn\n",
              reads.load(), a);
}

// 7. std::async, futures carrying exceptions, std::call_once, thread_local
// objects destroyed at each thread's exit.
static std::atomic<int> tls_destroyed{0};
struct PerThread {
  int uses = 0;
  ~PerThread() { tls_destroyed.fetch_add(1); }
};
static thread_local PerThread per_thread;

static void async_section() {
  constexpr int n = 16;
  std::once_flag once;
  std::atomic<int> once_runs{0};
  std::vector<std::future<int>> fs;
  for (int i = 0; i < n; i++)
    fs.push_back(std::async(std::launch::async, [&, i] {
      std::call_once(once, [&] { once_runs.fetch_add(1); });
      per_thread.uses++;
      if (i % 3 == 0) throw std::runtime_error("task " + std::to_string(i));
      return i * i;
    }));
  int sum = 0, thrown = 0;
  for (int i = 0; i < n; i++) {
    try {
      sum += fs[i].get();
    } catch (const std::runtime_error &e) {
      check(std::string(e.what()) == "task " + std::to_string(i), "async: wrong exception");
      thrown++;
    }
  }
  check(once_runs.load() == 1, "call_once ran more than once");
  check(tls_destroyed.load() == n, "thread_local destructors did not all run");
  std::printf("async: sum %d, %d exceptions, call_once once, %d thread_local destructors\n", sum,
              thrown, tls_destroyed.load());
}

// 8. 300 threads alive at once, blocked on a condition variable; the
// kernel threads are counted meanwhile.
static int count_tasks() {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void many_section() {
  constexpr int n = 300;
  std::mutex mu;
  std::condition_variable cv, arrived;
  int here = 0;
  bool open = false;
  long woke = 0;
  std::vector<std::thread> ts;
  for (int i = 0; i < n; i++)
    ts.emplace_back([&] {
      std::unique_lock lk(mu);
      here++;
      arrived.notify_one();
      cv.wait(lk, [&] { return open; });
      woke++;
    });
  {
    std::unique_lock lk(mu);
    arrived.wait(lk, [&] { return here == n; });
  }
  int tasks = 0;
  for (int s = 0; s < 5; s++) tasks = std::max(tasks, count_tasks());
  std::fprintf(stderr, "TASKS %d THREADS %d\n", tasks, n + 1);
  {
    std::lock_guard g(mu);
    open = true;
  }
  cv.notify_all();
  for (auto &t : ts) t.join();
  check(woke == n, "many: not every thread woke");
  std::printf("many: %d threads alive at once, all woke\n", n);
}

int main() {
  queue_section();
  jthread_section();
  barrier_section();
  atomic_wait_section();
  sleep_section();
  semaphore_rwlock_section();
  async_section();
  many_section();
  std::printf("threads_cxx: ok\n");
  return 0;
}
#endif
