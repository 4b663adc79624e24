// SQLite (Debian's libsqlite3) from many threads, two ways, every row
// checked (tests/run_programs.sh case sqlite):
//   1. one connection in serialized mode (SQLITE_CONFIG_SERIALIZED,
//      SQLITE_OPEN_FULLMUTEX) shared by 50 threads: inserts, reads back,
//      savepoints that update shared counters;
//   2. 32 threads with a connection each to one WAL database file: write
//      transactions (BEGIN IMMEDIATE, busy timeout: the threads wait for
//      each other in SQLite's busy handler and file locks), reads of their
//      own rows after each.
// Then every row, the counters and PRAGMA integrity_check. stdout is
// deterministic; "TASKS <kernel threads> THREADS <threads>" goes to stderr
// while every thread of part 1 is alive.
//   threads_sqlite DIR
#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT1 50
#define NR1 200
#define NT2 32
#define NTX2 20
#define PER2 10

static sqlite3 *shared;
static pthread_barrier_t bar;

static void die(sqlite3 *db, const char *what, int rc) {
  fprintf(stderr, "threads_sqlite: %s: %d %s\n", what, rc, db ? sqlite3_errmsg(db) : "");
  exit(1);
}

static void value1(char *buf, size_t n, long t, int i) {
  snprintf(buf, n, "t%ld-r%d-%ld", t, i, (t * 7919 + i * 104729L) % 1000003);
}

static void *part1(void *arg) {
  long id = (long)arg;
  sqlite3_stmt *ins, *sel;
  int rc;
  pthread_barrier_wait(&bar);
  if ((rc = sqlite3_prepare_v2(shared, "INSERT INTO t(tid,seq,val) VALUES(?,?,?)", -1, &ins, 0)))
    die(shared, "prepare insert", rc);
  if ((rc = sqlite3_prepare_v2(shared, "SELECT val FROM t WHERE tid=? AND seq=?", -1, &sel, 0)))
    die(shared, "prepare select", rc);
  for (int i = 0; i < NR1; i++) {
    char v[64];
    value1(v, sizeof v, id, i);
    sqlite3_bind_int(ins, 1, (int)id);
    sqlite3_bind_int(ins, 2, i);
    sqlite3_bind_text(ins, 3, v, -1, SQLITE_TRANSIENT);
    if ((rc = sqlite3_step(ins)) != SQLITE_DONE) die(shared, "insert", rc);
    sqlite3_reset(ins);
    if (i % 10 == 9) {
      char w[64];
      value1(w, sizeof w, id, i - 5);
      sqlite3_bind_int(sel, 1, (int)id);
      sqlite3_bind_int(sel, 2, i - 5);
      if ((rc = sqlite3_step(sel)) != SQLITE_ROW) die(shared, "select", rc);
      if (strcmp((const char *)sqlite3_column_text(sel, 0), w) != 0) {
        fprintf(stderr, "threads_sqlite: thread %ld read %s, wrote %s\n", id, sqlite3_column_text(sel, 0), w);
        exit(1);
      }
      sqlite3_reset(sel);
    }
    if (i % 50 == 49) {
      // A savepoint is per connection: the serialized connection's mutex
      // is held only per call, so another thread's statements may land
      // inside it; each statement is still atomic.
      char q[96];
      snprintf(q, sizeof q, "UPDATE c SET n=n+1 WHERE k=%ld", id % 5);
      if ((rc = sqlite3_exec(shared, q, 0, 0, 0))) die(shared, "update", rc);
    }
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(sel);
  return NULL;
}

static const char *path2;

static void *part2(void *arg) {
  long id = (long)arg;
  sqlite3 *db;
  int rc;
  if ((rc = sqlite3_open_v2(path2, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, 0)))
    die(NULL, "open", rc);
  sqlite3_busy_timeout(db, 60000);
  if ((rc = sqlite3_exec(db, "PRAGMA synchronous=OFF", 0, 0, 0))) die(db, "pragma", rc);
  pthread_barrier_wait(&bar);
  for (int x = 0; x < NTX2; x++) {
    if ((rc = sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0))) die(db, "begin", rc);
    for (int i = 0; i < PER2; i++) {
      char q[160];
      int seq = x * PER2 + i;
      snprintf(q, sizeof q, "INSERT INTO t VALUES(%ld,%d,'v%ld.%d.%ld')", id, seq, id, seq, (id * 31 + seq * 17) % 997);
      if ((rc = sqlite3_exec(db, q, 0, 0, 0))) die(db, "insert", rc);
    }
    char q[96];
    snprintf(q, sizeof q, "UPDATE c SET n=n+1 WHERE k=%ld", id % 4);
    if ((rc = sqlite3_exec(db, q, 0, 0, 0))) die(db, "update", rc);
    if ((rc = sqlite3_exec(db, "COMMIT", 0, 0, 0))) die(db, "commit", rc);
    sqlite3_stmt *s;
    snprintf(q, sizeof q, "SELECT count(*) FROM t WHERE tid=%ld", id);
    if ((rc = sqlite3_prepare_v2(db, q, -1, &s, 0))) die(db, "prepare count", rc);
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_int(s, 0) != (x + 1) * PER2) {
      fprintf(stderr, "threads_sqlite: thread %ld sees %d of its rows after transaction %d\n", id,
              sqlite3_column_int(s, 0), x);
      exit(1);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return NULL;
}

static int kernel_threads(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  if (!d) return -1;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

// Prints every row's hash, the counters and the integrity check of db.
static void report(sqlite3 *db, const char *what, long want_rows) {
  sqlite3_stmt *s;
  long rows = 0;
  unsigned long h = 5381;
  sqlite3_prepare_v2(db, "SELECT tid,seq,val FROM t ORDER BY tid,seq", -1, &s, 0);
  while (sqlite3_step(s) == SQLITE_ROW) {
    for (const unsigned char *p = sqlite3_column_text(s, 2); *p; p++) h = h * 33 + *p;
    rows++;
  }
  sqlite3_finalize(s);
  if (rows != want_rows) {
    fprintf(stderr, "threads_sqlite: %s: %ld rows, %ld expected\n", what, rows, want_rows);
    exit(1);
  }
  printf("%s: rows=%ld hash=%lx\n", what, rows, h);
  sqlite3_prepare_v2(db, "SELECT k,n FROM c ORDER BY k", -1, &s, 0);
  while (sqlite3_step(s) == SQLITE_ROW) printf("%s: c%d=%d\n", what, sqlite3_column_int(s, 0), sqlite3_column_int(s, 1));
  sqlite3_finalize(s);
  sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, 0);
  while (sqlite3_step(s) == SQLITE_ROW) printf("%s: integrity_check %s\n", what, sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: threads_sqlite DIR\n");
    return 2;
  }
  int rc;
  char p1[4096], p2[4096];
  snprintf(p1, sizeof p1, "%s/shared.db", argv[1]);
  snprintf(p2, sizeof p2, "%s/wal.db", argv[1]);
  path2 = p2;
  printf("threadsafe=%d\n", sqlite3_threadsafe());
  if ((rc = sqlite3_config(SQLITE_CONFIG_SERIALIZED))) die(NULL, "config", rc);
  const char *schema1 =
      "CREATE TABLE t(tid INT, seq INT, val TEXT, PRIMARY KEY(tid,seq));"
      "CREATE TABLE c(k INT PRIMARY KEY, n INT); INSERT INTO c VALUES(0,0),(1,0),(2,0),(3,0),(4,0);";
  if ((rc = sqlite3_open_v2(p1, &shared, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, 0)))
    die(NULL, "open", rc);
  if ((rc = sqlite3_exec(shared, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;", 0, 0, 0))) die(shared, "pragma", rc);
  if ((rc = sqlite3_exec(shared, schema1, 0, 0, 0))) die(shared, "schema", rc);
  pthread_t th[NT1 > NT2 ? NT1 : NT2];
  pthread_barrier_init(&bar, NULL, NT1 + 1);
  for (long i = 0; i < NT1; i++)
    if (pthread_create(&th[i], NULL, part1, (void *)i)) die(NULL, "pthread_create", 0);
  // Every thread of part 1 is alive (waiting on the barrier).
  fprintf(stderr, "TASKS %d THREADS %d\n", kernel_threads(), NT1 + 1);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < NT1; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
  report(shared, "serialized", (long)NT1 * NR1);
  sqlite3_close(shared);

  sqlite3 *db;
  if ((rc = sqlite3_open(p2, &db))) die(NULL, "open", rc);
  if ((rc = sqlite3_exec(db,
                         "PRAGMA journal_mode=WAL; CREATE TABLE t(tid INT, seq INT, val TEXT, PRIMARY KEY(tid,seq));"
                         "CREATE TABLE c(k INT PRIMARY KEY, n INT); INSERT INTO c VALUES(0,0),(1,0),(2,0),(3,0);",
                         0, 0, 0)))
    die(db, "schema", rc);
  pthread_barrier_init(&bar, NULL, NT2);
  for (long i = 0; i < NT2; i++)
    if (pthread_create(&th[i], NULL, part2, (void *)i)) die(NULL, "pthread_create", 0);
  for (int i = 0; i < NT2; i++) pthread_join(th[i], NULL);
  report(db, "connections", (long)NT2 * NTX2 * PER2);
  sqlite3_close(db);
  return 0;
}
