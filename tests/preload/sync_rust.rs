// Rust std synchronization under goshim: std::thread, Mutex, Condvar,
// RwLock, mpsc channels, Barrier, park/unpark, Once, thread::sleep.
// Rust 1.95's std uses syscall(SYS_futex) with FUTEX_WAIT_BITSET|PRIVATE
// (absolute monotonic timeouts) and FUTEX_WAKE|PRIVATE for all of them,
// so under goshim they must park goroutines, with every thread alive on
// GOSHIM_MAXPROCS + 4 kernel threads. Built with plain rustc, no crates.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex, Once, RwLock};
use std::thread;
use std::time::{Duration, Instant};

fn kernel_threads() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    for line in s.lines() {
        if let Some(v) = line.strip_prefix("Threads:") {
            return v.trim().parse().unwrap();
        }
    }
    0
}

fn check_kernel_threads(when: &str) {
    if let Ok(lim) = std::env::var("MAX_KERNEL_THREADS") {
        if let Ok(max) = lim.parse::<usize>() {
            let n = kernel_threads();
            assert!(n <= max, "{}: {} kernel threads, at most {} expected", when, n, max);
        }
    }
}

static INIT: Once = Once::new();
static INIT_COUNT: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let n: usize = std::env::var("NTHREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);

    // Mutex + Condvar: a bounded queue with many producers.
    {
        let state = Arc::new((Mutex::new(Vec::<usize>::new()), Condvar::new(), Condvar::new()));
        let mut hs = Vec::new();
        for p in 0..n {
            let st = state.clone();
            hs.push(thread::spawn(move || {
                for i in 0..50 {
                    let (m, not_empty, not_full) = &*st;
                    let mut q = m.lock().unwrap();
                    while q.len() >= 8 {
                        q = not_full.wait(q).unwrap();
                    }
                    q.push(p * 50 + i);
                    not_empty.notify_one();
                }
            }));
        }
        let st = state.clone();
        let consumer = thread::spawn(move || {
            let (m, not_empty, not_full) = &*st;
            let mut sum = 0usize;
            for _ in 0..n * 50 {
                let mut q = m.lock().unwrap();
                while q.is_empty() {
                    q = not_empty.wait(q).unwrap();
                }
                sum += q.pop().unwrap();
                not_full.notify_all();
            }
            sum
        });
        check_kernel_threads("Mutex/Condvar producers alive");
        for h in hs {
            h.join().unwrap();
        }
        let sum = consumer.join().unwrap();
        let total = n * 50;
        assert_eq!(sum, total * (total - 1) / 2);
    }
    println!("Mutex + Condvar queue: ok");

    // Condvar timeouts.
    {
        let pair = (Mutex::new(false), Condvar::new());
        let g = pair.0.lock().unwrap();
        let t0 = Instant::now();
        let (g, r) = pair.1.wait_timeout(g, Duration::from_millis(20)).unwrap();
        assert!(r.timed_out() && t0.elapsed() >= Duration::from_millis(20));
        drop(g);
    }
    println!("Condvar wait_timeout: ok");

    // RwLock: writers exclude readers, readers see consistent pairs.
    {
        let data = Arc::new(RwLock::new((0u64, 0u64)));
        let mut hs = Vec::new();
        for i in 0..n {
            let d = data.clone();
            hs.push(thread::spawn(move || {
                for k in 0..50 {
                    if (i + k) % 8 == 0 {
                        let mut w = d.write().unwrap();
                        w.0 += 1;
                        thread::yield_now();
                        w.1 += 1;
                    } else {
                        let r = d.read().unwrap();
                        assert_eq!(r.0, r.1);
                    }
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        let writes = (0..n).map(|i| (0..50).filter(|k| (i + k) % 8 == 0).count()).sum::<usize>();
        let r = data.read().unwrap();
        assert_eq!(r.0 as usize, writes);
        assert_eq!(r.1 as usize, writes);
    }
    println!("RwLock: ok");

    // mpsc channels: many senders, one receiver; a rendezvous channel.
    {
        let (tx, rx) = mpsc::channel::<usize>();
        let mut hs = Vec::new();
        for i in 0..n {
            let tx = tx.clone();
            hs.push(thread::spawn(move || {
                for k in 0..20 {
                    tx.send(i * 20 + k).unwrap();
                }
            }));
        }
        drop(tx);
        let sum: usize = rx.iter().sum();
        let total = n * 20;
        assert_eq!(sum, total * (total - 1) / 2);
        for h in hs {
            h.join().unwrap();
        }
        let (stx, srx) = mpsc::sync_channel::<u32>(0);
        let h = thread::spawn(move || (0..2000).map(|_| srx.recv().unwrap()).sum::<u32>());
        for i in 0..2000 {
            stx.send(i % 7).unwrap();
        }
        assert_eq!(h.join().unwrap(), (0..2000).map(|i| i % 7).sum::<u32>());
    }
    println!("mpsc channels: ok");

    // Barrier phases, exactly one leader per phase.
    {
        let b = Arc::new(Barrier::new(n));
        let leaders = Arc::new(AtomicUsize::new(0));
        let count = Arc::new(AtomicUsize::new(0));
        let mut hs = Vec::new();
        for _ in 0..n {
            let (b, leaders, count) = (b.clone(), leaders.clone(), count.clone());
            hs.push(thread::spawn(move || {
                for phase in 1..=10 {
                    count.fetch_add(1, Ordering::SeqCst);
                    if b.wait().is_leader() {
                        leaders.fetch_add(1, Ordering::SeqCst);
                    }
                    assert!(count.load(Ordering::SeqCst) >= phase * n);
                    b.wait();
                }
            }));
        }
        check_kernel_threads("Barrier threads alive");
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(leaders.load(Ordering::SeqCst), 10);
    }
    println!("Barrier: ok");

    // park/unpark hand-offs, Once, sleep.
    {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let main_thread = thread::current();
        let h = thread::spawn(move || {
            for _ in 0..2000 {
                while !f.swap(false, Ordering::AcqRel) {
                    thread::park();
                }
                main_thread.unpark();
            }
        });
        // Each hand-off is taken before the next is offered: a
        // park_timeout that timed out (the other thread waited more than
        // 100 ms for a CPU) would otherwise offer the next one on a flag
        // still set, two hand-offs would make one, and the other thread
        // would wait for its 2000th for ever (seen once at load 50).
        for _ in 0..2000 {
            flag.store(true, Ordering::Release);
            h.thread().unpark();
            while flag.load(Ordering::Acquire) {
                thread::park_timeout(Duration::from_millis(100));
            }
        }
        h.join().unwrap();
        let mut hs = Vec::new();
        for _ in 0..n {
            hs.push(thread::spawn(|| {
                INIT.call_once(|| {
                    thread::sleep(Duration::from_millis(5));
                    INIT_COUNT.fetch_add(1, Ordering::SeqCst);
                });
                assert_eq!(INIT_COUNT.load(Ordering::SeqCst), 1);
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        let t0 = Instant::now();
        let sleepers: Vec<_> = (0..50).map(|_| thread::spawn(|| thread::sleep(Duration::from_millis(30)))).collect();
        for s in sleepers {
            s.join().unwrap();
        }
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }
    println!("park/unpark, Once, sleep: ok");
}
