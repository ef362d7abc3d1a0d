#include <stdio.h>
#include <stdlib.h>

#include "wordfreq.h"

/* The whole of a file, in memory; *len is its size. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t cap = 4096, n = 0, k;
    char *buf = xmalloc(cap);
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *bigger = xmalloc(cap * 2);
            for (size_t i = 0; i < n; i++)
                bigger[i] = buf[i];
            free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: wordfreq TOP FILE...\n", stderr);
        return 2;
    }
    int top = atoi(argv[1]);
    struct table t;
    table_init(&t);
    char word[64];
    for (int a = 2; a < argc; a++) {
        size_t len, pos = 0, n;
        char *buf = slurp(argv[a], &len);
        while ((n = next_word(buf, len, &pos, word, sizeof word)) > 0)
            table_add(&t, word, n);
        free(buf);
    }
    struct entry **v = sorted_entries(&t);
    printf("%lu words, %lu distinct\n", t.words, (unsigned long)t.size);
    for (int i = 0; i < top && (size_t)i < t.size; i++)
        printf("%6lu %s\n", v[i]->count, v[i]->word);
    free(v);
    table_free(&t);
    return 0;
}
