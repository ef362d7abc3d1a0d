/*
 * The output side shared by Lookaside's QEMU plugins: the stream they write (its header and
 * blocks, documented byte by byte in crates/lookaside/src/trace/capture.rs), written with
 * whole writes under one lock, and the fd=N / out=PATH arguments that say where it goes.
 * Included by exactly one plugin source each; everything here is static.
 */
#ifndef LOOKASIDE_STREAM_H
#define LOOKASIDE_STREAM_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "qemu-plugin-v1.h"

enum { TAG_RECORDS = 1, TAG_EXEC = 2, TAG_END = 3, TAG_PROC = 4, TAG_EXCLUDED = 5, TAG_LAYOUT = 6 };

#define PIPE_BYTES (1 << 20)

struct block {
    uint32_t tag;
    uint32_t vcpu;
    uint64_t count;
};

static int out_fd = -1;
static int closed; /* no more output (finished, failed, or a forked child) */
static uint64_t written;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *msg)
{
    char line[600];
    snprintf(line, sizeof line, "lookaside-plugin: %s\n", msg);
    qemu_plugin_outs(line);
}

/* Writes all of iov to the output; on failure stops all output. Called with out_lock held. */
static void write_all(struct iovec *iov, int cnt)
{
    while (cnt > 0 && !closed) {
        ssize_t k = writev(out_fd, iov, cnt);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            char msg[256];
            snprintf(msg, sizeof msg, "writing the trace failed: %s", strerror(errno));
            say(msg);
            closed = 1;
            return;
        }
        while (cnt > 0 && (size_t)k >= iov->iov_len) {
            k -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + k;
            iov->iov_len -= k;
        }
    }
}

/* One block: its header and `len` bytes of data. Called with out_lock held. */
static void put_block(uint32_t tag, uint32_t vcpu, uint64_t count, const void *data,
                      size_t len)
{
    struct block h = {tag, vcpu, count};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)data, len}};
    write_all(iov, len ? 2 : 1);
}

/* Handles an fd=N or out=PATH argument (returns 1), or returns 0 for any other; -1 after
 * saying what is wrong. */
static int output_arg(const char *arg)
{
    if (strncmp(arg, "fd=", 3) == 0) {
        char *end;
        long fd = strtol(arg + 3, &end, 10);
        if (*end || fd < 0 || fcntl((int)fd, F_GETFD) < 0) {
            say("fd=N: not an open file descriptor");
            return -1;
        }
        out_fd = (int)fd;
        return 1;
    }
    if (strncmp(arg, "out=", 4) == 0) {
        out_fd = open(arg + 4, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out_fd < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: %s", arg + 4, strerror(errno));
            say(msg);
            return -1;
        }
        return 1;
    }
    return 0;
}

/* Moves the output out of the guest program's way (a file it opens must never get the
 * number of the stream; closed on execve, so that programs it starts do not hold the stream
 * open) and writes the stream header. Returns 0, or -1 after saying why. */
static int open_stream(uint32_t version, uint32_t rec_size)
{
    if (out_fd < 0) {
        say("no output: give fd=N or out=PATH");
        return -1;
    }
    int high = fcntl(out_fd, F_DUPFD_CLOEXEC, 1000);
    if (high >= 0) {
        close(out_fd);
        out_fd = high;
    } else {
        fcntl(out_fd, F_SETFD, FD_CLOEXEC);
    }
#ifdef F_SETPIPE_SZ
    fcntl(out_fd, F_SETPIPE_SZ, PIPE_BYTES); /* fewer stalls; harmless if refused */
#endif
    struct {
        char magic[8];
        uint32_t version;
        uint32_t rec_size;
    } head = {{'L', 'K', 'S', 'C', 'A', 'P', 'T', 'R'}, version, rec_size};
    struct iovec iov = {&head, sizeof head};
    pthread_mutex_lock(&out_lock);
    write_all(&iov, 1);
    pthread_mutex_unlock(&out_lock);
    return closed ? -1 : 0;
}

#endif
