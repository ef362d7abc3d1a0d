/*
 * A ring of PROCS processes passing a token through pipes, HOPS hops in all, each process
 * touching PAGES pages of its own memory (its working set: one store per 64-byte line) for
 * every token it handles: the multi-address-space case of Bala, Kaashoek and Weihl
 * ("Software prefetching and caching for TLBs", 1994), where a request crosses a chain of
 * user-level servers and each hop switches address space. The token carries the hop count;
 * each process checks it and counts its own hops, and the first process checks the totals.
 * Usage: ring [PROCS [HOPS [PAGES]]]   (default 4 processes, 4000 hops, 8 pages)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct token {
    long hop;    /* hops so far; -1 stops the ring */
    long sum;    /* what the working sets hold: it makes their touches real work */
    char pad[48];
};

static void xfer(int fd, struct token *t, int out)
{
    ssize_t k = out ? write(fd, t, sizeof *t) : read(fd, t, sizeof *t);
    if (k != (ssize_t)sizeof *t) {
        perror(out ? "ring: write" : "ring: read");
        exit(1);
    }
}

/* One process of the ring: reads from `in`, writes to `out`. Process 0 starts the token
 * and stops it after `hops` hops. Returns the hops this process handled. */
static long serve(int id, int procs, long hops, long pages, int in, int out)
{
    size_t size = (size_t)pages * 4096;
    unsigned char *mem = malloc(size ? size : 1);
    if (!mem) {
        perror("ring: malloc");
        exit(1);
    }
    memset(mem, 0, size);
    long mine = 0;
    struct token t;
    memset(&t, 0, sizeof t);
    if (id == 0)
        xfer(out, &t, 1);
    for (;;) {
        xfer(in, &t, 0);
        if (t.hop < 0) {
            if (id != 0)
                xfer(out, &t, 1);
            break;
        }
        if ((t.hop + 1) % procs != id) {
            fprintf(stderr, "ring: process %d got hop %ld out of turn\n", id, t.hop);
            exit(1);
        }
        long sum = 0;
        for (size_t i = 0; i < size; i += 64) {
            mem[i] = (unsigned char)(mem[i] + 1);
            sum += mem[i];
        }
        t.sum += sum;
        t.hop++;
        mine++;
        if (id == 0 && t.hop >= hops) {
            /* The token came round to its start with every hop done: stop the ring. */
            t.hop = -1;
        }
        xfer(out, &t, 1);
        if (id == 0 && t.hop < 0) {
            xfer(in, &t, 0);
            break;
        }
    }
    free(mem);
    return mine;
}

int main(int argc, char **argv)
{
    int procs = argc > 1 ? atoi(argv[1]) : 4;
    long hops = argc > 2 ? atol(argv[2]) : 4000;
    long pages = argc > 3 ? atol(argv[3]) : 8;
    if (procs < 2 || hops < 1 || pages < 0) {
        fprintf(stderr, "usage: ring [PROCS>=2 [HOPS>=1 [PAGES>=0]]]\n");
        return 2;
    }
    /* Whole laps only, so that process 0 sees the end and every process as many hops. */
    hops = (hops + procs - 1) / procs * procs;
    int (*fd)[2] = calloc((size_t)procs, sizeof *fd);
    for (int i = 0; i < procs; i++)
        if (pipe(fd[i])) {
            perror("ring: pipe");
            return 1;
        }
    /* Process i reads pipe i and writes pipe (i + 1) % procs. */
    for (int i = 1; i < procs; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("ring: fork");
            return 1;
        }
        if (pid == 0) {
            long mine = serve(i, procs, hops, pages, fd[i][0], fd[(i + 1) % procs][1]);
            _exit(mine == hops / procs ? 0 : 1);
        }
    }
    long mine = serve(0, procs, hops, pages, fd[0][0], fd[1][1]);
    int ok = mine == hops / procs;
    for (int i = 1; i < procs; i++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "ring: a process handled the wrong number of hops\n");
        return 1;
    }
    printf("ring: %d processes, %ld hops, %ld pages each\n", procs, hops, pages);
    return 0;
}
