# Python's threading, queue and concurrent.futures (run_programs.sh case
# "scripts"): a producer/consumer queue, a thread pool hashing (hashlib
# releases the GIL), a condition-variable ping-pong, a barrier and an event
# set by a Timer, a bounded semaphore, subprocesses started from threads,
# and 300 short threads with thread-local data. (The process pool is
# procpool_py.py, case "procpool".)
# Every printed value is independent of scheduling.
import threading, queue, concurrent.futures as cf, hashlib, time, os, sys, subprocess
# 1. producer/consumer via queue
q = queue.Queue(maxsize=16); out = queue.Queue()
def prod(k):
    for i in range(2000): q.put((k, i))
def cons():
    s = 0
    while True:
        it = q.get()
        if it is None: break
        s += it[0]*100000 + it[1]
    out.put(s)
ps=[threading.Thread(target=prod,args=(k,)) for k in range(6)]
cs=[threading.Thread(target=cons) for _ in range(5)]
for t in ps+cs: t.start()
for t in ps: t.join()
for _ in cs: q.put(None)
for t in cs: t.join()
tot=0
while not out.empty(): tot+=out.get()
print("queue total", tot)
# 2. thread pool hashing (releases GIL)
def h(i): return hashlib.sha256(bytes([i%256])*200000).hexdigest()[:16]
with cf.ThreadPoolExecutor(max_workers=8) as ex:
    print("pool", hashlib.sha256("".join(ex.map(h, range(200))).encode()).hexdigest())
# 3. condition variable ping-pong
cv=threading.Condition(); turn=[0]; log=[]
def pp(me):
    for i in range(500):
        with cv:
            while turn[0]!=me: cv.wait()
            log.append(me); turn[0]=1-me; cv.notify_all()
a=threading.Thread(target=pp,args=(0,)); b=threading.Thread(target=pp,args=(1,))
a.start(); b.start(); a.join(); b.join()
print("pingpong", len(log), log[:6])
# 4. timers and events, barrier
ev=threading.Event(); bar=threading.Barrier(10); cnt=[0]; lk=threading.Lock()
def w():
    bar.wait(); ev.wait()
    with lk: cnt[0]+=1
ts=[threading.Thread(target=w) for _ in range(10)]
for t in ts: t.start()
threading.Timer(0.05, ev.set).start()
for t in ts: t.join()
print("barrier/event", cnt[0])
# 5. semaphores and sleeps
sem=threading.BoundedSemaphore(3); mx=[0]; cur=[0]
def s(i):
    with sem:
        with lk: cur[0]+=1; mx[0]=max(mx[0],cur[0])
        time.sleep(0.002)
        with lk: cur[0]-=1
ts=[threading.Thread(target=s,args=(i,)) for i in range(50)]
for t in ts: t.start()
for t in ts: t.join()
print("sem max<=3", mx[0]<=3)
# 6. subprocess from threads
def sp(i): return subprocess.run(["echo", str(i)], capture_output=True, text=True).stdout.strip()
with cf.ThreadPoolExecutor(max_workers=6) as ex:
    print("subprocess", list(ex.map(sp, range(30)))[-3:])
# 7. thread-local and many short threads
tl=threading.local(); res=[]
def loc(i):
    tl.v=i; time.sleep(0); res.append(tl.v==i)
ts=[threading.Thread(target=loc,args=(i,)) for i in range(300)]
for t in ts: t.start()
for t in ts: t.join()
print("local", all(res), len(res))
