// Kill-and-restart workload for the mariadb_kill case of
// tests/run_programs.sh, with libmariadb; runs natively against a private
// mariadbd (the program under test) on a unix socket.
//
//   db_kill load SOCKET SERVER_PID NCONN TXNS
//   db_kill verify SOCKET
//
// load: creates database k: accounts(id, balance), hot (one row a control
// session locks: a table of its own, so that no gap lock of a transfer
// or of the total's range scan touches it), log
// (one row per committed transfer: conn, seq, src, dst, amount) and acked.
// NCONN threads each open a connection; while they are all open, and all
// through the run, a sampler counts /proc/SERVER_PID/task (the server's
// kernel threads) and prints "TASKS max", "TASKS_CONNECTED n" and the
// thread names at the maximum on stderr. Each connection runs transfer
// transactions (a read of both rows, two balance updates in id order, one
// log insert, COMMIT; retried whole on deadlock or lock wait timeout), and
// every 4th time a locking read of the total, which never changes.
// Twenty connections are killed mid-transaction with KILL CONNECTION from a
// control session, once they are all in position:
//   LOCKWAIT victims: a transfer's first update done, then waiting for the
//     hot row's lock (an InnoDB lock wait);
//   SLEEP victims: a whole transfer done but not committed, then in
//     SELECT SLEEP(100) (holding row locks other transfers wait for);
//   ACTIVE victims: running transfers back to back; the kill lands
//     wherever they are (a COMMIT in flight may or may not commit).
// Every victim must see a kill error; the others run TXNS transfers and
// keep going until the kills are over. Each connection's count of
// acknowledged commits is stored in table acked.
// verify (after a clean shutdown and a restart): CHECK TABLE ... EXTENDED
// on every table; every acknowledged commit is there and no killed
// transaction is (exactly, except one in-flight COMMIT of an ACTIVE
// victim); every balance equals the start plus the logged transfers; the
// total is unchanged. stdout is deterministic; exit status 0 when all hold.

#include <dirent.h>
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server_tasks.h"

#define NACCOUNTS 1024
#define START_BALANCE 100000
#define NVICTIMS 20
#define VICTIM_TXNS 4  // transfers a LOCKWAIT/SLEEP victim commits before its last

enum kind { NORMAL, LOCKWAIT, SLEEPER, ACTIVE };
static const char *kind_name[] = {"normal", "lockwait", "sleep", "active"};

static const char *sock;
static int nconn, ntxn;
static pthread_barrier_t connected, go;
static atomic_long deadlocks, lock_timeouts, snapshot_conflicts;

// An error after which the whole transaction is run again: a deadlock, a
// lock wait timeout, or (MariaDB 11.6 and later, innodb_snapshot_isolation
// on by default: Debian 13's 11.8) a row changed since this transaction's
// read view was made (ER_CHECKREAD, "try restarting transaction").
static int retryable(int err) {
  if (err == ER_LOCK_DEADLOCK) deadlocks++;
  else if (err == ER_LOCK_WAIT_TIMEOUT) lock_timeouts++;
  else if (err == ER_CHECKREAD) snapshot_conflicts++;
  else return 0;
  return 1;
}
static atomic_int active_ready;  // ACTIVE victims with 3 commits done
static atomic_int kills_done, workers_done;
static atomic_int in_kill_txn;   // LOCKWAIT/SLEEP victims inside their last transaction
static int n_active, n_waiters;
static atomic_int waiters_ready;  // LOCKWAIT/SLEEP victims with VICTIM_TXNS commits done
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

struct conn {
  enum kind kind;
  unsigned long id;   // CONNECTION_ID()
  long acked;         // COMMITs that returned OK
  int inflight;       // killed while its COMMIT was in flight
  int killed_err;     // the error a victim saw
  int posted;         // counted in in_kill_txn
  _Atomic(const char *) doing;  // the statement it runs (diagnosis)
};
static struct conn *conns;

static void fatal(MYSQL *m, const char *what) {
  fprintf(stderr, "db_kill: %s: %s (%u)\n", what, m ? mysql_error(m) : "", m ? mysql_errno(m) : 0);
  exit(1);
}

static MYSQL *open_conn(void) {
  MYSQL *m = mysql_init(NULL);
  if (!m) fatal(NULL, "mysql_init");
  unsigned int tmo = 120;  // more than SLEEP(100): a read timeout is never taken for a kill
  mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &tmo);
  mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &tmo);
  if (!mysql_real_connect(m, NULL, "root", NULL, NULL, 0, sock, 0)) fatal(m, "connect");
  return m;
}

static void q(MYSQL *m, const char *fmt, ...) {
  char sql[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  if (mysql_query(m, sql)) fatal(m, sql);
  MYSQL_RES *r = mysql_store_result(m);
  if (r) mysql_free_result(r);
}

// One integer (first column of the first row; NULL is 0).
static long long q1(MYSQL *m, const char *fmt, ...) {
  char sql[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  if (mysql_query(m, sql)) fatal(m, sql);
  MYSQL_RES *r = mysql_store_result(m);
  if (!r) fatal(m, sql);
  MYSQL_ROW row = mysql_fetch_row(r);
  if (!row) fatal(m, sql);
  long long v = row[0] ? atoll(row[0]) : 0;
  mysql_free_result(r);
  return v;
}

static int is_kill_error(int e) {
  return e == ER_CONNECTION_KILLED || e == CR_SERVER_LOST || e == CR_SERVER_GONE_ERROR;
}

// A statement's result (discarded); its error number or 0.
static _Thread_local int my_id = -1;
static int run(MYSQL *m, const char *sql) {
  if (my_id >= 0) atomic_store(&conns[my_id].doing, sql);
  if (mysql_query(m, sql)) return (int)mysql_errno(m);
  MYSQL_RES *r = mysql_store_result(m);
  if (r) mysql_free_result(r);
  else if (mysql_field_count(m)) return (int)mysql_errno(m);
  return 0;
}

static void wait_until(atomic_int *v, int want) {
  pthread_mutex_lock(&mu);
  while (atomic_load(v) < want) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void bump(atomic_int *v) {
  pthread_mutex_lock(&mu);
  atomic_fetch_add(v, 1);
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

// One transfer, seq s of connection id: 0 when committed, else the kill
// error (a victim's end). mode: NORMAL commits; LOCKWAIT stops after the
// first update and waits for the hot row; SLEEPER sleeps before COMMIT.
static void bump(atomic_int *v);
static int transfer(MYSQL *m, int id, long s, enum kind mode, int *inflight, int *posted);
static int transfer(MYSQL *m, int id, long s, enum kind mode, int *inflight, int *posted) {
  int a = (int)((id * 7 + s * 13) % NACCOUNTS), b = (int)((id * 11 + s * 5 + 1) % NACCOUNTS);
  if (a == b) b = (b + 1) % NACCOUNTS;
  int lo = a < b ? a : b, hi = a < b ? b : a;
  int amount = (int)((id * 31 + s * 17) % 97 + 1);
  char sel[160], u0[128], u1[128], ins[160];
  snprintf(sel, sizeof sel, "SELECT id, balance FROM accounts WHERE id IN (%d, %d)", lo, hi);
  snprintf(u0, sizeof u0, "UPDATE accounts SET balance = balance %c %d WHERE id = %d",
           lo == a ? '-' : '+', amount, lo);
  snprintf(u1, sizeof u1, "UPDATE accounts SET balance = balance %c %d WHERE id = %d",
           hi == a ? '-' : '+', amount, hi);
  snprintf(ins, sizeof ins, "INSERT INTO log VALUES (%d, %ld, %d, %d, %d)", id, s, a, b, amount);
  for (int attempt = 0;; attempt++) {
    int err = run(m, "START TRANSACTION");
    if (!err && mode != NORMAL && !*posted) {
      *posted = 1;
      bump(&in_kill_txn);
    }
    if (!err) err = run(m, sel);
    if (!err) err = run(m, u0);
    if (!err && mode == LOCKWAIT) {
      char h[96];
      snprintf(h, sizeof h, "UPDATE hot SET v = v + 1 WHERE id = 1");
      err = run(m, h);
      if (!err) {
        fprintf(stderr, "db_kill: lockwait victim %d got the hot row\n", id);
        exit(1);
      }
    }
    if (!err) err = run(m, u1);
    if (!err) err = run(m, ins);
    if (!err && mode == SLEEPER) {
      err = run(m, "SELECT SLEEP(100)");
      if (!err) {
        fprintf(stderr, "db_kill: sleep victim %d was not killed\n", id);
        exit(1);
      }
    }
    if (!err) {
      err = run(m, "COMMIT");
      if (err && is_kill_error(err)) *inflight = 1;
    }
    if (!err) return 0;
    if (is_kill_error(err)) return err;
    if (!retryable(err) || attempt > 1000) {
      char what[64];
      snprintf(what, sizeof what, "transfer %d/%ld", id, s);
      fatal(m, what);
    }
    err = run(m, "ROLLBACK");
    if (err && is_kill_error(err)) return err;
    if (err) fatal(m, "ROLLBACK");
  }
}

// The locking read of the total: 0, or the kill error.
static int check_total(MYSQL *m, int id) {
  for (int attempt = 0;; attempt++) {
    int err = run(m, "START TRANSACTION");
    long long sum = -1, n = -1;
    if (!err) {
      if (mysql_query(m, "SELECT SUM(balance), COUNT(*) FROM accounts LOCK IN SHARE MODE")) {
        err = (int)mysql_errno(m);
      } else {
        MYSQL_RES *r = mysql_store_result(m);
        if (!r) {
          err = (int)mysql_errno(m);
        } else {
          MYSQL_ROW row = mysql_fetch_row(r);
          if (!row || !row[0] || !row[1]) fatal(m, "SELECT SUM");
          sum = atoll(row[0]);
          n = atoll(row[1]);
          mysql_free_result(r);
        }
      }
    }
    if (!err) err = run(m, "COMMIT");
    if (!err) {
      if (sum != (long long)NACCOUNTS * START_BALANCE || n != NACCOUNTS) {
        fprintf(stderr, "db_kill: connection %d saw total %lld over %lld accounts\n", id, sum, n);
        exit(1);
      }
      return 0;
    }
    if (is_kill_error(err)) return err;
    if (!retryable(err) || attempt > 1000) fatal(m, "locking read");
    err = run(m, "ROLLBACK");
    if (err && is_kill_error(err)) return err;
    if (err) fatal(m, "ROLLBACK");
  }
}

static void *worker(void *arg) {
  int id = (int)(long)arg;
  struct conn *c = &conns[id];
  my_id = id;
  mysql_thread_init();
  MYSQL *m = open_conn();
  q(m, "USE k");
  c->id = (unsigned long)q1(m, "SELECT CONNECTION_ID()");
  pthread_barrier_wait(&connected);
  pthread_barrier_wait(&go);
  int err = 0;
  for (long s = 0; !err; s++) {
    enum kind mode = NORMAL;
    if (c->kind == NORMAL && s >= ntxn && atomic_load(&kills_done)) break;
    if ((c->kind == LOCKWAIT || c->kind == SLEEPER) && s == VICTIM_TXNS) {
      // In position only once the ACTIVE victims are running, and all
      // together: one still committing its earlier transfers could wait
      // for a row a sleeping victim holds, until the kills.
      bump(&waiters_ready);
      wait_until(&active_ready, n_active);
      wait_until(&waiters_ready, n_waiters);
      mode = c->kind;
    }
    err = transfer(m, id, s, mode, &c->inflight, &c->posted);
    if (err) break;
    c->acked = s + 1;
    if (c->kind == ACTIVE && s == 2) bump(&active_ready);
    if (s % 16 == 15) err = check_total(m, id);
  }
  if (c->kind == NORMAL && err) {
    fprintf(stderr, "db_kill: connection %d (not a victim) got error %d\n", id, err);
    exit(1);
  }
  c->killed_err = err;
  mysql_close(m);
  mysql_thread_end();
  bump(&workers_done);
  return NULL;
}

// The server's thread names ("name xN, ..."), into buf.
static void task_names(const char *taskpath, char *buf, size_t len) {
  struct { char name[20]; int n; } seen[64];
  int ns = 0;
  DIR *d = opendir(taskpath);
  buf[0] = 0;
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[384], name[20] = "?";
    snprintf(p, sizeof p, "%s/%s/comm", taskpath, e->d_name);
    FILE *f = fopen(p, "r");
    if (f) {
      if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
      fclose(f);
    }
    int i;
    for (i = 0; i < ns; i++)
      if (!strcmp(seen[i].name, name)) break;
    if (i == ns && ns < 64) {
      snprintf(seen[ns].name, sizeof seen[0].name, "%s", name);
      seen[ns++].n = 0;
    }
    if (i < ns) seen[i].n++;
  }
  closedir(d);
  size_t o = 0;
  for (int i = 0; i < ns && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s x%d", i ? ", " : "", seen[i].name, seen[i].n);
}

static char taskpath[64];
static int task_max, iowq_max;
static char task_max_names[2048];

static int count_tasks(int *iowq) { return count_server_tasks(taskpath, iowq); }

static void *sampler(void *arg) {
  (void)arg;
  while (atomic_load(&workers_done) < nconn) {
    int iowq, n = count_tasks(&iowq);
    if (n > task_max) {
      task_max = n;
      task_names(taskpath, task_max_names, sizeof task_max_names);
    }
    if (iowq > iowq_max) iowq_max = iowq;
    usleep(10000);
  }
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int load(const char *pid, int argc_rest, char **rest) {
  if (argc_rest != 2) return 2;
  nconn = atoi(rest[0]);
  ntxn = atoi(rest[1]);
  if (nconn < 2 * NVICTIMS || ntxn < 8) {
    fprintf(stderr, "db_kill: at least %d connections and 8 transactions\n", 2 * NVICTIMS);
    return 2;
  }
  MYSQL *m = open_conn();
  q(m, "CREATE DATABASE k");
  q(m, "USE k");
  q(m, "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB");
  q(m, "CREATE TABLE log (conn INT, seq INT, src INT NOT NULL, dst INT NOT NULL, amount INT NOT NULL, "
       "PRIMARY KEY (conn, seq), KEY (src), KEY (dst)) ENGINE=InnoDB");
  q(m, "CREATE TABLE hot (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB");
  q(m, "INSERT INTO hot VALUES (1, 0)");
  q(m, "CREATE TABLE acked (conn INT PRIMARY KEY, kind VARCHAR(16) NOT NULL, n INT NOT NULL, "
       "inflight INT NOT NULL) ENGINE=InnoDB");
  {
    static char sql[NACCOUNTS * 24 + 128];
    size_t o = (size_t)snprintf(sql, sizeof sql, "INSERT INTO accounts VALUES ");
    for (int i = 0; i < NACCOUNTS; i++)
      o += (size_t)snprintf(sql + o, sizeof sql - o, "%s(%d, %d)", i ? "," : "", i, START_BALANCE);
    if (mysql_query(m, sql)) fatal(m, "INSERT INTO accounts");
  }

  // Victims: every 10th connection from 5; kinds in turn.
  conns = calloc((size_t)nconn, sizeof *conns);
  int nv = 0;
  for (int i = 5; i < nconn && nv < NVICTIMS; i += nconn / NVICTIMS, nv++)
    conns[i].kind = nv % 3 == 0 ? LOCKWAIT : nv % 3 == 1 ? SLEEPER : ACTIVE;
  int nlock = 0, nsleep = 0;
  for (int i = 0; i < nconn; i++) nlock += conns[i].kind == LOCKWAIT, nsleep += conns[i].kind == SLEEPER;
  n_active = nv - nlock - nsleep;
  n_waiters = nlock + nsleep;

  double tstart = now(), tconnected, tpos, tkilled;
  pthread_barrier_init(&connected, NULL, (unsigned)nconn + 1);
  pthread_barrier_init(&go, NULL, (unsigned)nconn + 1);
  pthread_t *th = calloc((size_t)nconn, sizeof *th), samp;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 256 * 1024);
  for (int i = 0; i < nconn; i++)
    if (pthread_create(&th[i], &at, worker, (void *)(long)i)) fatal(NULL, "pthread_create");
  pthread_barrier_wait(&connected);
  tconnected = now();
  snprintf(taskpath, sizeof taskpath, "/proc/%s/task", pid);
  // All NCONN connections are open (each has its server thread) and idle.
  int tasks_connected = 0;
  for (int s = 0; s < 10; s++) {
    int iowq, n = count_tasks(&iowq);
    if (n > tasks_connected) tasks_connected = n;
    usleep(5000);
  }
  if (pthread_create(&samp, NULL, sampler, NULL)) fatal(NULL, "pthread_create");

  // The hot row, locked by this control session.
  q(m, "START TRANSACTION");
  q(m, "SELECT * FROM hot WHERE id = 1 FOR UPDATE");
  pthread_barrier_wait(&go);

  // Wait (bounded) until every LOCKWAIT and SLEEP victim is inside its
  // last transaction and waits there: in its UPDATE of the hot row, in
  // SLEEP, or for a row lock another victim holds (INNODB_TRX; InnoDB
  // refreshes that table only when it was not read for 0.1 s: hence the
  // 0.15 s between polls).
  MYSQL *k = open_conn();
  q(k, "USE k");
  char ids[512] = "";
  size_t io = 0;
  for (int i = 0; i < nconn; i++)
    if (conns[i].kind == LOCKWAIT || conns[i].kind == SLEEPER)
      io += (size_t)snprintf(ids + io, sizeof ids - io, "%s%lu", io ? "," : "", conns[i].id);
  double t0 = now();
  wait_until(&in_kill_txn, nlock + nsleep);
  for (;;) {
    long long w = q1(k, "SELECT COUNT(*) FROM information_schema.PROCESSLIST p LEFT JOIN "
                        "information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID WHERE p.ID IN (%s) "
                        "AND (t.trx_state = 'LOCK WAIT' OR p.INFO LIKE 'SELECT SLEEP%%' OR p.INFO LIKE 'UPDATE hot %%')",
                 ids);
    if (w == nlock + nsleep) break;
    if (now() - t0 > 55) {
      fprintf(stderr, "db_kill: victims not in position after 55 s: %lld/%d waiting\n", w, nlock + nsleep);
      char sql[1024];
      snprintf(sql, sizeof sql, "SELECT p.ID, p.COMMAND, p.STATE, p.TIME, LEFT(p.INFO, 60), t.trx_state "
               "FROM information_schema.PROCESSLIST p LEFT JOIN information_schema.INNODB_TRX t "
               "ON t.trx_mysql_thread_id = p.ID WHERE p.ID IN (%s)", ids);
      if (!mysql_query(k, sql)) {
        MYSQL_RES *r = mysql_store_result(k);
        MYSQL_ROW row;
        while (r && (row = mysql_fetch_row(r)))
          fprintf(stderr, "db_kill:  victim %s: %s, %s, %s s, %s, %s\n", row[0], row[1] ? row[1] : "-",
                  row[2] ? row[2] : "-", row[3] ? row[3] : "-", row[4] ? row[4] : "-", row[5] ? row[5] : "-");
        if (r) mysql_free_result(r);
      }
      for (int i = 0; i < nconn; i++)
        if (conns[i].kind == LOCKWAIT || conns[i].kind == SLEEPER) {
          const char *d = atomic_load(&conns[i].doing);
          fprintf(stderr, "db_kill:  victim %lu (%s) client: %.60s\n", conns[i].id, kind_name[conns[i].kind],
                  d ? d : "-");
        }
      exit(1);
    }
    usleep(150000);
  }
  tpos = now();
  // Kill all twenty, kinds interleaved.
  for (int i = 0; i < nconn; i++)
    if (conns[i].kind != NORMAL) q(k, "KILL CONNECTION %lu", conns[i].id);
  q(m, "ROLLBACK");
  pthread_mutex_lock(&mu);
  atomic_store(&kills_done, 1);
  pthread_mutex_unlock(&mu);
  tkilled = now();
  for (int i = 0; i < nconn; i++) pthread_join(th[i], NULL);
  pthread_join(samp, NULL);
  // The killed connections are gone.
  char allids[1024];
  size_t ao = 0;
  for (int i = 0; i < nconn; i++)
    if (conns[i].kind != NORMAL)
      ao += (size_t)snprintf(allids + ao, sizeof allids - ao, "%s%lu", ao ? "," : "", conns[i].id);
  t0 = now();
  while (q1(k, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (%s)", allids)) {
    if (now() - t0 > 40) {
      fprintf(stderr, "db_kill: killed connections still listed after 40 s\n");
      exit(1);
    }
    usleep(10000);
  }
  // TASKS: the most kernel threads of the server's own seen while the
  // connections were open (io_uring workers apart: IOWQ).
  fprintf(stderr, "TASKS %d\nTASKS_CONNECTED %d\nIOWQ %d\nTASK_NAMES %s\n", task_max, tasks_connected, iowq_max,
          task_max_names);
  fprintf(stderr, "PHASES connected %.1f s, in position %.1f s, killed %.1f s, done %.1f s\n", tconnected - tstart,
          tpos - tstart, tkilled - tstart, now() - tstart);
  fprintf(stderr, "RETRIES deadlock %ld, lock wait timeout %ld, snapshot conflict %ld\n", deadlocks, lock_timeouts,
          snapshot_conflicts);
  int bad = 0;
  long total = 0;
  for (int i = 0; i < nconn; i++) {
    struct conn *c = &conns[i];
    if (c->kind != NORMAL && !is_kill_error(c->killed_err)) {
      fprintf(stderr, "db_kill: %s victim %d ended with error %d\n", kind_name[c->kind], i, c->killed_err);
      bad = 1;
    }
    if ((c->kind == LOCKWAIT || c->kind == SLEEPER) && c->acked != VICTIM_TXNS) {
      fprintf(stderr, "db_kill: %s victim %d: %ld commits\n", kind_name[c->kind], i, c->acked);
      bad = 1;
    }
    if (c->kind == NORMAL && c->acked < ntxn) bad = 1;
    total += c->acked;
    q(k, "INSERT INTO acked VALUES (%d, '%s', %ld, %d)", i, kind_name[c->kind], c->acked, c->inflight);
  }
  fprintf(stderr, "COMMITS %ld\n", total);
  printf("connections %d, %d killed (%d in a lock wait, %d asleep in a transaction, %d active)\n", nconn, nv,
         nlock, nsleep, nv - nlock - nsleep);
  printf("victims saw kill errors: %s\n", bad ? "no" : "yes");
  mysql_close(k);
  mysql_close(m);
  return bad;
}

static int verify(void) {
  MYSQL *m = open_conn();
  q(m, "USE k");
  int bad = 0;
  const char *tables[] = {"accounts", "log", "acked", "hot"};
  for (int i = 0; i < 4; i++) {
    char sql[64];
    snprintf(sql, sizeof sql, "CHECK TABLE %s EXTENDED", tables[i]);
    if (mysql_query(m, sql)) fatal(m, sql);
    MYSQL_RES *r = mysql_store_result(m);
    MYSQL_ROW row;
    int ok = 0;
    while (r && (row = mysql_fetch_row(r))) {
      printf("check %s: %s %s\n", row[0], row[2], row[3]);
      if (!strcmp(row[2], "status") && !strcmp(row[3], "OK")) ok = 1;
      else bad = 1;
    }
    if (r) mysql_free_result(r);
    if (!ok) bad = 1;
  }
  long long nconn_ = q1(m, "SELECT COUNT(*) FROM acked");
  printf("connections %lld\n", nconn_);
  if (nconn_ < 2 * NVICTIMS) bad = 1;
  // Every acknowledged commit is there, nothing else (one in-flight
  // COMMIT of an active victim may have committed).
  const char *kinds[] = {"normal", "lockwait", "sleep", "active"};
  for (int i = 0; i < 4; i++) {
    long long n = q1(m, "SELECT COUNT(*) FROM acked WHERE kind = '%s'", kinds[i]);
    long long wrong = q1(m,
        "SELECT COUNT(*) FROM acked a WHERE a.kind = '%s' AND NOT "
        "((SELECT COUNT(*) FROM log l WHERE l.conn = a.conn) = a.n OR "
        "(a.inflight = 1 AND (SELECT COUNT(*) FROM log l WHERE l.conn = a.conn) = a.n + 1))",
        kinds[i]);
    long long gaps = q1(m,
        "SELECT COUNT(*) FROM acked a WHERE a.kind = '%s' AND "
        "(SELECT COUNT(*) FROM log l WHERE l.conn = a.conn) <> "
        "(SELECT COALESCE(MAX(seq) + 1, 0) FROM log l WHERE l.conn = a.conn)", kinds[i]);
    printf("%s connections %lld: log rows match acknowledged commits: %s\n", kinds[i], n,
           wrong || gaps ? "NO" : "yes");
    if (wrong || gaps) {
      fprintf(stderr, "db_kill: %lld %s connections with wrong log row counts, %lld with gaps\n", wrong,
              kinds[i], gaps);
      bad = 1;
    }
  }
  long long stray = q1(m, "SELECT COUNT(*) FROM log WHERE conn NOT IN (SELECT conn FROM acked)");
  printf("log rows of no connection: %lld\n", stray);
  if (stray) bad = 1;
  long long mismatch = q1(m,
      "SELECT COUNT(*) FROM accounts a WHERE a.balance <> %d "
      "+ (SELECT COALESCE(SUM(amount), 0) FROM log WHERE dst = a.id) "
      "- (SELECT COALESCE(SUM(amount), 0) FROM log WHERE src = a.id)",
      START_BALANCE);
  printf("balances that differ from the logged transfers: %lld\n", mismatch);
  if (mismatch) bad = 1;
  long long n = q1(m, "SELECT COUNT(*) FROM accounts"), total = q1(m, "SELECT SUM(balance) FROM accounts"),
            hot = q1(m, "SELECT COUNT(*) FROM hot WHERE v = 0");
  printf("accounts %lld, total %lld, hot row unchanged %lld\n", n, total, hot);
  if (n != NACCOUNTS || total != (long long)NACCOUNTS * START_BALANCE || hot != 1) bad = 1;
  long long logrows = q1(m, "SELECT COUNT(*) FROM log"), acked = q1(m, "SELECT SUM(n) FROM acked");
  fprintf(stderr, "LOGROWS %lld ACKED %lld\n", logrows, acked);
  mysql_close(m);
  return bad;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "load") && strcmp(argv[1], "verify")) ||
      (!strcmp(argv[1], "load") && argc != 6) || (!strcmp(argv[1], "verify") && argc != 3)) {
    fprintf(stderr, "usage: db_kill load SOCKET SERVER_PID NCONN TXNS | db_kill verify SOCKET\n");
    return 2;
  }
  sock = argv[2];
  if (mysql_library_init(0, NULL, NULL)) fatal(NULL, "mysql_library_init");
  int r = !strcmp(argv[1], "load") ? load(argv[3], 2, argv + 4) : verify();
  mysql_library_end();
  return r;
}
