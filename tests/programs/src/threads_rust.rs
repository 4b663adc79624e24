// Rust standard-library threads and synchronization, as an ordinary
// program would use them (plain rustc, std only, knows nothing of goshim).
// Every section checks its own invariants; stdout holds only results that
// do not depend on scheduling (counts, sums), so it is the same natively
// and under goshim. While 300 threads are alive it prints
// "TASKS <kernel threads> THREADS <threads>" on stderr (tests/run_programs.sh
// checks M:N with it).
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex, Once, RwLock};
use std::thread;
use std::time::{Duration, Instant};

fn check(ok: bool, what: &str) {
    if !ok {
        eprintln!("threads_rust: FAILED: {}", what);
        std::process::exit(1);
    }
}

// 1. mpsc channels: unbounded fan-in, and a bounded sync_channel.
fn channels() {
    let (tx, rx) = mpsc::channel::<u64>();
    let mut hs = Vec::new();
    for p in 0..16u64 {
        let tx = tx.clone();
        hs.push(thread::spawn(move || {
            for i in 0..5000u64 {
                tx.send(p * 1_000_000 + i).unwrap();
            }
        }));
    }
    drop(tx);
    let (mut n, mut sum) = (0u64, 0u64);
    for v in rx {
        n += 1;
        sum += v;
    }
    for h in hs {
        h.join().unwrap();
    }
    let want: u64 = (0..16u64).map(|p| (0..5000u64).map(|i| p * 1_000_000 + i).sum::<u64>()).sum();
    check(n == 80_000 && sum == want, "channel: messages lost or duplicated");

    let (stx, srx) = mpsc::sync_channel::<u64>(4);
    let consumers: Vec<_> = {
        let srx = Arc::new(Mutex::new(srx));
        (0..4)
            .map(|_| {
                let srx = Arc::clone(&srx);
                thread::spawn(move || {
                    let (mut n, mut s) = (0u64, 0u64);
                    loop {
                        let v = srx.lock().unwrap().recv();
                        match v {
                            Ok(v) => {
                                n += 1;
                                s += v;
                            }
                            Err(_) => return (n, s),
                        }
                    }
                })
            })
            .collect()
    };
    let producers: Vec<_> = (0..8u64)
        .map(|p| {
            let stx = stx.clone();
            thread::spawn(move || {
                for i in 0..2000u64 {
                    stx.send(p * 10_000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(stx);
    for h in producers {
        h.join().unwrap();
    }
    let (mut bn, mut bs) = (0u64, 0u64);
    for h in consumers {
        let (n, s) = h.join().unwrap();
        bn += n;
        bs += s;
    }
    check(bn == 16_000, "sync_channel: messages lost");
    println!("channel: {} messages, sum {}; sync_channel(4): {} messages, sum {}", n, sum, bn, bs);
}

// 2. A bounded queue on Mutex and two Condvars.
fn mutex_condvar() {
    struct Q {
        items: VecDeque<i64>,
    }
    let q = Arc::new((Mutex::new(Q { items: VecDeque::new() }), Condvar::new(), Condvar::new()));
    let mut hs = Vec::new();
    for p in 0..8i64 {
        let q = Arc::clone(&q);
        hs.push(thread::spawn(move || {
            let (m, not_full, not_empty) = &*q;
            for i in 0..4000i64 {
                let mut g = not_full.wait_while(m.lock().unwrap(), |g| g.items.len() >= 8).unwrap();
                g.items.push_back(p * 100_000 + i);
                not_empty.notify_one();
            }
        }));
    }
    let mut cs = Vec::new();
    for _ in 0..8 {
        let q = Arc::clone(&q);
        cs.push(thread::spawn(move || {
            let (m, not_full, not_empty) = &*q;
            let (mut n, mut s) = (0i64, 0i64);
            loop {
                let mut g = not_empty.wait_while(m.lock().unwrap(), |g| g.items.is_empty()).unwrap();
                let v = g.items.pop_front().unwrap();
                not_full.notify_one();
                drop(g);
                if v < 0 {
                    return (n, s);
                }
                n += 1;
                s += v;
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    {
        let (m, not_full, not_empty) = &*q;
        for _ in 0..8 {
            let mut g = not_full.wait_while(m.lock().unwrap(), |g| g.items.len() >= 8).unwrap();
            g.items.push_back(-1);
            not_empty.notify_one();
        }
    }
    let (mut n, mut s) = (0, 0);
    for h in cs {
        let (a, b) = h.join().unwrap();
        n += a;
        s += b;
    }
    check(n == 32_000, "mutex/condvar queue: items lost");
    // wait_timeout on a condition that never comes times out.
    let (m, c) = (Mutex::new(()), Condvar::new());
    let t0 = Instant::now();
    let (_g, r) = c.wait_timeout(m.lock().unwrap(), Duration::from_millis(20)).unwrap();
    check(r.timed_out() && t0.elapsed() >= Duration::from_millis(20), "condvar wait_timeout");
    println!("mutex/condvar: {} items, sum {}; wait_timeout timed out", n, s);
}

// 3. Barrier (one leader per round) and thread::scope.
fn barrier_scope() {
    let n = 24;
    let rounds = 80;
    let b = Arc::new(Barrier::new(n));
    let leaders = Arc::new(AtomicUsize::new(0));
    let slots: Arc<Vec<AtomicUsize>> = Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
    let hs: Vec<_> = (0..n)
        .map(|t| {
            let (b, leaders, slots) = (Arc::clone(&b), Arc::clone(&leaders), Arc::clone(&slots));
            thread::spawn(move || {
                for r in 0..rounds {
                    slots[t].store(r + 1, SeqCst);
                    if b.wait().is_leader() {
                        leaders.fetch_add(1, SeqCst);
                    }
                    // Everyone wrote this round before anyone passed.
                    for s in slots.iter() {
                        check(s.load(SeqCst) >= r + 1, "barrier: passed before all arrived");
                    }
                    b.wait();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    check(leaders.load(SeqCst) == rounds, "barrier: not one leader per round");

    let data: Vec<u64> = (0..200_000u64).map(|i| i * i % 1_000_003).collect();
    let mut partial = vec![0u64; 16];
    thread::scope(|sc| {
        for (chunk, out) in data.chunks(data.len() / 16).zip(partial.iter_mut()) {
            sc.spawn(move || *out = chunk.iter().sum());
        }
    });
    let total: u64 = partial.iter().sum();
    check(total == data.iter().sum::<u64>(), "scope: wrong sum");
    println!("barrier: {} rounds of {} threads, {} leaders; scope: sum {}", rounds, n, leaders.load(SeqCst), total);
}

// 4. park/unpark: a token passed around a ring of threads.
fn park_ring() {
    let n = 16;
    let laps = 300;
    let turn = Arc::new(AtomicUsize::new(usize::MAX));
    // Every thread gets the ring's handles over a channel before its first
    // turn (std::sync::OnceLock needs rustc 1.70; Debian 12 has 1.63).
    let mut handles_tx = Vec::new();
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let turn = Arc::clone(&turn);
            let (tx, rx) = mpsc::channel::<Vec<thread::Thread>>();
            handles_tx.push(tx);
            thread::spawn(move || {
                let threads = rx.recv().unwrap();
                let mut passes = 0;
                for _ in 0..laps {
                    while turn.load(SeqCst) != i {
                        thread::park();
                    }
                    passes += 1;
                    let next = (i + 1) % n;
                    turn.store(next, SeqCst);
                    threads[next].unpark();
                }
                passes
            })
        })
        .collect();
    let ring: Vec<thread::Thread> = hs.iter().map(|h| h.thread().clone()).collect();
    for tx in &handles_tx {
        tx.send(ring.clone()).unwrap();
    }
    turn.store(0, SeqCst);
    hs[0].thread().unpark();
    let total: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    check(total == n * laps, "park ring: wrong number of passes");
    println!("park/unpark: ring of {} threads, {} passes", n, total);
}

// 5. RwLock, Once, thread_local! with a destructor, panics
// caught by join.
struct Counted;
static DROPPED: AtomicUsize = AtomicUsize::new(0);
impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, SeqCst);
    }
}
thread_local! {
    static MINE: (Cell<u32>, Counted) = (Cell::new(0), Counted);
}

fn rwlock_once_tls() {
    let rw = Arc::new(RwLock::new((0u64, 0u64)));
    let torn = Arc::new(AtomicUsize::new(0));
    let once = Arc::new(Once::new());
    let once_runs = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..32usize)
        .map(|i| {
            let (rw, torn, once, once_runs) =
                (Arc::clone(&rw), Arc::clone(&torn), Arc::clone(&once), Arc::clone(&once_runs));
            thread::spawn(move || {
                once.call_once(|| {
                    once_runs.fetch_add(1, SeqCst);
                });
                MINE.with(|m| m.0.set(m.0.get() + 1));
                for k in 0..300usize {
                    if (i + k) % 4 == 0 {
                        let mut g = rw.write().unwrap();
                        g.0 += 1;
                        thread::yield_now();
                        g.1 += 1;
                    } else {
                        let g = rw.read().unwrap();
                        if g.0 != g.1 {
                            torn.fetch_add(1, SeqCst);
                        }
                    }
                }
                if i % 5 == 0 {
                    panic!("thread {} panics on purpose", i);
                }
                i
            })
        })
        .collect();
    let (mut ok, mut panicked) = (0, 0);
    for h in hs {
        match h.join() {
            Ok(_) => ok += 1,
            Err(_) => panicked += 1,
        }
    }
    let writes = rw.read().unwrap().0;
    check(torn.load(SeqCst) == 0, "rwlock: torn read");
    check(once_runs.load(SeqCst) == 1, "Once ran more than once");
    check(DROPPED.load(SeqCst) == 32, "thread_local destructors did not all run");
    println!(
        "rwlock: {} writes, none torn; once ran once; {} joined, {} panicked; {} thread_local drops",
        writes,
        ok,
        panicked,
        DROPPED.load(SeqCst)
    );
}

// 6. thread::sleep never returns early.
fn sleeps() {
    let short = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..64u64)
        .map(|i| {
            let short = Arc::clone(&short);
            thread::spawn(move || {
                for k in 0..5u64 {
                    let d = Duration::from_micros(500 * (1 + (i + k) % 8));
                    let t0 = Instant::now();
                    thread::sleep(d);
                    if t0.elapsed() < d {
                        short.fetch_add(1, SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    check(short.load(SeqCst) == 0, "sleep returned early");
    println!("sleep: 320 sleeps by 64 threads, none short");
}

// 7. 300 threads alive at once, blocked on a Condvar; kernel threads are
// counted meanwhile.
fn many() {
    let n = 300;
    let state = Arc::new((Mutex::new((0usize, false)), Condvar::new(), Condvar::new()));
    let woke = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let (state, woke) = (Arc::clone(&state), Arc::clone(&woke));
            thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let (m, gate, arrived) = &*state;
                    let mut g = m.lock().unwrap();
                    g.0 += 1;
                    arrived.notify_one();
                    let _g = gate.wait_while(g, |g| !g.1).unwrap();
                    woke.fetch_add(1, SeqCst);
                })
                .unwrap()
        })
        .collect();
    {
        let (m, _, arrived) = &*state;
        let _g = arrived.wait_while(m.lock().unwrap(), |g| g.0 < n).unwrap();
    }
    let mut tasks = 0;
    for _ in 0..5 {
        tasks = tasks.max(std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0));
    }
    eprintln!("TASKS {} THREADS {}", tasks, n + 1);
    {
        let (m, gate, _) = &*state;
        m.lock().unwrap().1 = true;
        gate.notify_all();
    }
    for h in hs {
        h.join().unwrap();
    }
    check(woke.load(SeqCst) == n, "many: not every thread woke");
    println!("many: {} threads alive at once, all woke", n);
}

fn main() {
    // The panics of section 5 are expected: keep their messages short.
    let quiet = Arc::new(AtomicBool::new(false));
    let q = Arc::clone(&quiet);
    std::panic::set_hook(Box::new(move |info| {
        if !q.load(SeqCst) {
            eprintln!("{}", info);
        }
    }));
    channels();
    mutex_condvar();
    barrier_scope();
    park_ring();
    quiet.store(true, SeqCst);
    rwlock_once_tls();
    quiet.store(false, SeqCst);
    sleeps();
    many();
    println!("threads_rust: ok");
}
