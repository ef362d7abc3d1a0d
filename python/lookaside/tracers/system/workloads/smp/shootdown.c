/*
 * TLB shootdowns as a multi-threaded program causes them: the main thread maps a region,
 * every worker thread (one per other CPU, each held to its own CPU) stores into each of its
 * pages, and the main thread unmaps it. The workers stay running in the process's address
 * space (they spin, they never sleep), so each unmap must reach their CPUs: the kernel sends
 * every one of them a shootdown of the region's pages. ROUNDS regions of PAGES pages; each
 * worker checks that it saw every round and the main thread checks every worker's stores.
 * On one CPU there are no workers and no shootdowns.
 * Usage: shootdown [ROUNDS [PAGES]]   (default 8 rounds of 8 pages)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_WORKERS 31

static long rounds = 8, pages = 8, page;
static char *_Atomic region;
static atomic_long published; /* the round whose region the workers store into */
static atomic_long stored;    /* worker rounds done, over all workers */

static void pin(long cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("shootdown: sched_setaffinity");
        exit(1);
    }
}

static void *worker(void *arg)
{
    long id = (long)arg;
    pin(id + 1);
    for (long r = 1; r <= rounds; r++) {
        while (atomic_load(&published) < r)
            ; /* spin: this CPU keeps running the process's address space */
        char *p = atomic_load(&region);
        for (long k = 0; k < pages; k++)
            p[k * page + 64 * (id + 1)] = (char)(r + id);
        atomic_fetch_add(&stored, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    if (argc > 2)
        pages = atol(argv[2]);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long workers = cpus - 1 > MAX_WORKERS ? MAX_WORKERS : cpus - 1;
    page = sysconf(_SC_PAGESIZE);
    if (rounds < 1 || pages < 1 || workers < 0) {
        fprintf(stderr, "usage: shootdown [ROUNDS [PAGES]]\n");
        return 2;
    }
    pin(0);
    pthread_t t[MAX_WORKERS];
    for (long i = 0; i < workers; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
            fprintf(stderr, "shootdown: cannot start a worker\n");
            return 1;
        }
    for (long r = 1; r <= rounds; r++) {
        char *p = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED) {
            perror("shootdown: mmap");
            return 1;
        }
        for (long k = 0; k < pages; k++)
            p[k * page] = (char)r;
        atomic_store(&region, p);
        atomic_store(&published, r);
        while (atomic_load(&stored) < r * workers)
            ; /* spin until every worker has stored into every page */
        for (long k = 0; k < pages; k++)
            for (long i = 0; i < workers; i++)
                if (p[k * page + 64 * (i + 1)] != (char)(r + i)) {
                    fprintf(stderr, "shootdown: round %ld: worker %ld's store is missing\n",
                            r, i);
                    return 1;
                }
        if (munmap(p, pages * page) != 0) {
            perror("shootdown: munmap");
            return 1;
        }
    }
    for (long i = 0; i < workers; i++)
        pthread_join(t[i], NULL);
    printf("shootdown: %ld rounds of %ld pages, %ld workers\n", rounds, pages, workers);
    return 0;
}
