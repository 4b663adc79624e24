import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

// Java platform threads (make programs, case java): N threads alive at once
// (held by a latch; "TASKS n threads N" on stderr then), a fixed pool of 16
// with 1,000 futures, a bounded queue on synchronized/wait/notifyAll, a
// ConcurrentHashMap and parallel streams (the common fork/join pool), a
// caught NullPointerException (the JVM's SIGSEGV handler). Prints only
// results the synchronization fixes.
//   java ThreadsJava N
public class ThreadsJava {
    static long work(long seed, int n) {
        long x = seed;
        for (int i = 0; i < n; i++) x = x * 6364136223846793005L + 1442695040888963407L ^ (x >>> 17);
        return x;
    }
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        CountDownLatch started = new CountDownLatch(n), go = new CountDownLatch(1);
        long[] res = new long[n];
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            final int id = i;
            ts[i] = new Thread(() -> {
                started.countDown();
                try { go.await(); } catch (InterruptedException e) { throw new RuntimeException(e); }
                res[id] = work(id, 20000);
            });
            ts[i].start();
        }
        started.await();
        int tasks = new java.io.File("/proc/self/task").list().length;
        System.err.println("TASKS " + tasks + " threads " + n);
        go.countDown();
        for (Thread t : ts) t.join();
        long h = 0;
        for (long r : res) h = h * 31 + r;
        System.out.println("threads " + n + " " + Long.toHexString(h));

        ExecutorService pool = Executors.newFixedThreadPool(16);
        List<Future<Long>> fs = new ArrayList<>();
        for (int i = 0; i < 1000; i++) { final int id = i; fs.add(pool.submit(() -> work(id, 5000))); }
        h = 0;
        for (Future<Long> f : fs) h = h * 31 + f.get();
        pool.shutdown();
        System.out.println("pool " + pool.awaitTermination(60, TimeUnit.SECONDS) + " " + Long.toHexString(h));

        // producer/consumer with synchronized, wait and notifyAll
        final LinkedList<Integer> q = new LinkedList<>();
        final AtomicLong sum = new AtomicLong();
        Thread[] cons = new Thread[8];
        for (int i = 0; i < 8; i++) {
            cons[i] = new Thread(() -> {
                while (true) {
                    int v;
                    synchronized (q) {
                        while (q.isEmpty()) { try { q.wait(); } catch (InterruptedException e) { return; } }
                        v = q.removeFirst();
                        q.notifyAll();
                    }
                    if (v < 0) return;
                    sum.addAndGet(v);
                }
            });
            cons[i].start();
        }
        for (int i = 0; i < 20000; i++) {
            synchronized (q) { while (q.size() > 64) q.wait(); q.addLast(i); q.notifyAll(); }
        }
        synchronized (q) { for (int i = 0; i < 8; i++) q.addLast(-1); q.notifyAll(); }
        for (Thread t : cons) t.join();
        System.out.println("queue " + sum.get());

        ConcurrentHashMap<Integer, Integer> m = new ConcurrentHashMap<>();
        java.util.stream.IntStream.range(0, 200000).parallel().forEach(i -> m.merge(i % 1000, 1, Integer::sum));
        System.out.println("map " + m.size() + " " + m.values().stream().mapToInt(Integer::intValue).sum());
        long ps = java.util.stream.LongStream.range(0, 2000000).parallel().map(i -> i * i % 1000003).sum();
        System.out.println("stream " + ps);
        try { Object o = null; o.hashCode(); } catch (NullPointerException e) { System.out.println("npe caught"); }
    }
}
