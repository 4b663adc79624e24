# A process pool started from a threaded process (run_programs.sh case
# "procpool"): ProcessPoolExecutor forks its workers, which share a
# multiprocessing queue guarded by process-shared semaphores (sem_open)
# with the parent and each other, and exit at shutdown. Five pools in a
# row. Every printed value is independent of scheduling.
import concurrent.futures as cf
for r in range(5):
    with cf.ProcessPoolExecutor(max_workers=4) as ex:
        print("procpool", r, sum(ex.map(pow, range(100), [3] * 100)))
