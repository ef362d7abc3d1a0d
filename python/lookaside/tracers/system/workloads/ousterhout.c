/*
 * Operating-system primitives in the spirit of Ousterhout's benchmarks ("Why aren't
 * operating systems getting faster as fast as hardware?", 1990): kernel entry and exit,
 * context switches through a pipe between two processes, select on ready pipes, a block
 * copy, reads from the file cache, open and close, and file create, write, read and delete.
 * Each runs a fixed count (the guest's clock is virtual: nothing is timed) and checks what
 * it gets back; the program exits non-zero on the first wrong answer.
 * Usage: ousterhout [SCALE]   (counts are multiplied by SCALE, default 1)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail(const char *what)
{
    perror(what);
    exit(1);
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "ousterhout: %s: wrong result\n", what);
        exit(1);
    }
}

/* Kernel entry and exit: getpid(2) by its system call (glibc does not cache it). */
static void getpid_loop(long n)
{
    long pid = syscall(SYS_getpid);
    for (long i = 0; i < n; i++)
        check(syscall(SYS_getpid) == pid, "getpid");
    printf("getpid: %ld calls\n", n);
}

/* Context switches: a one-byte token passed back and forth between two processes through
 * two pipes, each incrementing it; two switches a round trip. */
static void cswitch(long n)
{
    int a[2], b[2];
    if (pipe(a) || pipe(b))
        fail("pipe");
    pid_t child = fork();
    if (child < 0)
        fail("fork");
    unsigned char t = 0;
    if (child == 0) {
        for (long i = 0; i < n; i++) {
            if (read(a[0], &t, 1) != 1)
                fail("read");
            t++;
            if (write(b[1], &t, 1) != 1)
                fail("write");
        }
        _exit(0);
    }
    for (long i = 0; i < n; i++) {
        unsigned char sent = t;
        if (write(a[1], &t, 1) != 1 || read(b[0], &t, 1) != 1)
            fail("pipe round trip");
        check(t == (unsigned char)(sent + 1), "context switch token");
        t++;
    }
    int status;
    if (waitpid(child, &status, 0) != child || status != 0)
        fail("context switch child");
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
    printf("context switch: %ld round trips\n", n);
}

/* select(2) on ten pipes of which every other one is ready to read. */
static void select_loop(long n)
{
    int fds[10][2], maxfd = 0;
    for (int i = 0; i < 10; i++) {
        if (pipe(fds[i]))
            fail("pipe");
        if (i % 2 == 0 && write(fds[i][1], "x", 1) != 1)
            fail("write");
        maxfd = fds[i][0] > maxfd ? fds[i][0] : maxfd;
    }
    for (long k = 0; k < n; k++) {
        fd_set r;
        FD_ZERO(&r);
        for (int i = 0; i < 10; i++)
            FD_SET(fds[i][0], &r);
        struct timeval tv = {0, 0};
        check(select(maxfd + 1, &r, NULL, NULL, &tv) == 5, "select");
    }
    for (int i = 0; i < 10; i++)
        close(fds[i][0]), close(fds[i][1]);
    printf("select: %ld calls on 10 pipes\n", n);
}

/* Block copy: 64 KB copied back and forth. */
static void bcopy_loop(long n)
{
    enum { SIZE = 64 << 10 };
    char *a = malloc(SIZE), *b = malloc(SIZE);
    if (!a || !b)
        fail("malloc");
    for (int i = 0; i < SIZE; i++)
        a[i] = (char)(i * 7);
    for (long k = 0; k < n; k++) {
        memcpy(b, a, SIZE);
        memcpy(a, b, SIZE);
    }
    check(memcmp(a, b, SIZE) == 0 && a[SIZE - 1] == (char)((SIZE - 1) * 7), "block copy");
    free(a), free(b);
    printf("block copy: %ld x 2 x 64 KB\n", n);
}

/* Reads from the file cache: a 64 KB file read whole, 4 KB at a time, over and over. */
static void read_loop(long n)
{
    enum { SIZE = 64 << 10 };
    static char buf[4096];
    int fd = open("read.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail("open read.dat");
    long sum = 0;
    for (int i = 0; i < SIZE / 4096; i++) {
        memset(buf, i, sizeof buf);
        if (write(fd, buf, sizeof buf) != sizeof buf)
            fail("write read.dat");
        sum += (long)i * 4096;
    }
    for (long k = 0; k < n; k++) {
        long got = 0;
        if (lseek(fd, 0, SEEK_SET) != 0)
            fail("lseek");
        for (int i = 0; i < SIZE / 4096; i++) {
            if (read(fd, buf, sizeof buf) != sizeof buf)
                fail("read read.dat");
            got += (long)(unsigned char)buf[0] * 4096;
        }
        check(got == sum, "file read");
    }
    close(fd);
    unlink("read.dat");
    printf("file read: %ld x 64 KB\n", n);
}

/* open and close of a file three directories down. */
static void open_close(long n)
{
    if (mkdir("d1", 0755) || mkdir("d1/d2", 0755) || mkdir("d1/d2/d3", 0755))
        fail("mkdir");
    int fd = open("d1/d2/d3/f", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail("create d1/d2/d3/f");
    close(fd);
    for (long k = 0; k < n; k++) {
        fd = open("d1/d2/d3/f", O_RDONLY);
        check(fd >= 0, "open");
        close(fd);
    }
    unlink("d1/d2/d3/f");
    rmdir("d1/d2/d3"), rmdir("d1/d2"), rmdir("d1");
    printf("open-close: %ld\n", n);
}

/* Create, write SIZE bytes, close, reopen, read back, close, delete. */
static void create_delete(long n, int size)
{
    static char buf[10240], back[10240];
    for (long k = 0; k < n; k++) {
        memset(buf, (int)(k & 0xff), (size_t)size);
        int fd = open("tmpfile", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, (size_t)size) != size || close(fd))
            fail("create");
        fd = open("tmpfile", O_RDONLY);
        if (fd < 0 || read(fd, back, sizeof back) != size || close(fd))
            fail("reread");
        check(memcmp(buf, back, (size_t)size) == 0, "create-delete contents");
        if (unlink("tmpfile"))
            fail("unlink");
    }
    printf("create-delete: %ld files of %d bytes\n", n, size);
}

int main(int argc, char **argv)
{
    long s = argc > 1 ? atol(argv[1]) : 1;
    if (s < 1) {
        fprintf(stderr, "usage: ousterhout [SCALE]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    getpid_loop(8000 * s);
    cswitch(1000 * s);
    select_loop(2000 * s);
    bcopy_loop(16 * s);
    read_loop(80 * s);
    open_close(2000 * s);
    create_delete(400 * s, 0);
    create_delete(400 * s, 10240);
    printf("ousterhout: ok\n");
    return 0;
}
