'use strict';
// Node.js threads (make programs, case node): libuv's thread pool (zlib,
// crypto.pbkdf2, fs) and worker_threads (separate V8 isolates on threads of
// their own) synchronized with Atomics.wait/notify on a SharedArrayBuffer.
// Prints only results the synchronization fixes; on stderr one line
// "TASKS n threads m" while m threads (the workers and the pool's) are alive.
//   node threads_node.js DIR NWORKERS
const zlib = require('zlib');
const crypto = require('crypto');
const fs = require('fs');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

if (!isMainThread) {
  const { id, sab, rounds } = workerData;
  const a = new Int32Array(sab);
  Atomics.add(a, 0, 1);
  Atomics.notify(a, 0);
  while (Atomics.load(a, 1) === 0) Atomics.wait(a, 1, 0);
  const h = crypto.createHash('sha256');
  for (let i = 0; i < rounds; i++) {
    h.update(String(id * 100000 + i));
    Atomics.add(a, 2, 1);
  }
  parentPort.postMessage({ id, digest: h.digest('hex') });
  return;
}

const dir = process.argv[2];
const NW = Number(process.argv[3]);
const POOL = Number(process.env.UV_THREADPOOL_SIZE);
const cb = (f) => new Promise((res, rej) => f((e, r) => (e ? rej(e) : res(r))));

async function main() {
  // libuv starts its whole pool at the first request: the pool's threads
  // are alive (idle) from here on.
  fs.mkdirSync(dir, { recursive: true });
  await fs.promises.stat(dir);
  // worker threads, all alive (waiting in Atomics.wait) when counted.
  // They start one after another (each waits in Atomics.wait before the
  // next is made), so few threads are ever in a blocking system call at
  // once: goshim then needs no kernel threads beyond its Ps' (an M whose
  // thread sleeps in the kernel has its P handed to a new or idle M).
  // The main thread must not block in Atomics.wait (a worker's start needs
  // its event loop): it polls the count between timer ticks.
  const sab = new SharedArrayBuffer(12);
  const a = new Int32Array(sab);
  const results = [];
  const exits = [];
  for (let i = 0; i < NW; i++) {
    const w = new Worker(__filename, { workerData: { id: i, sab, rounds: 500 } });
    exits.push(new Promise((res, rej) => {
      w.on('message', (m) => results.push(m));
      w.on('error', rej);
      w.on('exit', res);
    }));
    while (Atomics.load(a, 0) < i + 1) await new Promise((r) => setTimeout(r, 1));
  }
  process.stderr.write(`TASKS ${fs.readdirSync('/proc/self/task').length} threads ${NW + POOL}\n`);
  Atomics.store(a, 1, 1);
  Atomics.notify(a, 1);
  const codes = await Promise.all(exits);
  results.sort((x, y) => x.id - y.id);
  const rh = crypto.createHash('sha256');
  results.forEach((r) => rh.update(r.id + ' ' + r.digest));
  console.log('workers', results.length, codes.every((c) => c === 0), Atomics.load(a, 2), rh.digest('hex'));
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  const bufs = [];
  for (let i = 0; i < 200; i++) {
    const b = Buffer.alloc(20000 + ((i * 37) % 5000));
    for (let j = 0; j < b.length; j++) b[j] = 97 + (rnd() % (3 + (i % 20)));
    bufs.push(b);
  }
  // zlib on the pool: every call in flight at once
  const comp = await Promise.all(bufs.map((b) => cb((k) => zlib.deflate(b, { level: 6 }, k))));
  const back = await Promise.all(comp.map((c) => cb((k) => zlib.inflate(c, k))));
  const zh = crypto.createHash('sha256');
  comp.forEach((c) => zh.update(c));
  console.log('zlib', comp.length, back.every((b, i) => b.equals(bufs[i])), zh.digest('hex'));
  // crypto on the pool
  const keys = await Promise.all(Array.from({ length: 64 }, (_, i) =>
    cb((k) => crypto.pbkdf2('pw' + i, 'salt', 2000, 32, 'sha256', k))));
  const kh = crypto.createHash('sha256');
  keys.forEach((k) => kh.update(k));
  console.log('pbkdf2', keys.length, kh.digest('hex'));
  // fs on the pool
  await Promise.all(bufs.map((b, i) => fs.promises.writeFile(`${dir}/f${i}`, b)));
  const rd = await Promise.all(bufs.map((b, i) => fs.promises.readFile(`${dir}/f${i}`)));
  console.log('fs', rd.length, rd.every((b, i) => b.equals(bufs[i])));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
