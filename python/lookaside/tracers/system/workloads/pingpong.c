/*
 * A client and a server talking over a pair of pipes: the client sends a request of SIZE
 * bytes, the server answers with as many, ROUNDS times. Every round trip is two system calls
 * and two context switches each way, which is what the microkernel studies of IPC measure.
 * Usage: pingpong [ROUNDS [SIZE]]   (default 2000 rounds of 64 bytes)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void xfer(int fd, char *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (k <= 0) {
            perror(out ? "write" : "read");
            exit(1);
        }
        done += (size_t)k;
    }
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    int req[2], rep[2];
    char *buf = malloc(size);
    if (!buf || size == 0 || rounds < 0 || pipe(req) || pipe(rep)) {
        perror("pingpong");
        return 1;
    }
    pid_t server = fork();
    if (server < 0) {
        perror("fork");
        return 1;
    }
    if (server == 0) {
        close(req[1]);
        close(rep[0]);
        for (long i = 0; i < rounds; i++) {
            xfer(req[0], buf, size, 0);
            buf[0]++;
            xfer(rep[1], buf, size, 1);
        }
        return 0;
    }
    close(req[0]);
    close(rep[1]);
    memset(buf, 0, size);
    for (long i = 0; i < rounds; i++) {
        xfer(req[1], buf, size, 1);
        xfer(rep[0], buf, size, 0);
    }
    int status;
    waitpid(server, &status, 0);
    printf("pingpong: %ld round trips of %zu bytes\n", rounds, size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
