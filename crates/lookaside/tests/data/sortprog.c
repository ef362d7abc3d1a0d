/*
 * sortprog: a small, deterministic workload for trace tests.
 *
 * Fills an array with pseudo-random keys, quicksorts it, then inserts the keys into an
 * open-addressing hash table and looks every one of them up again. Instruction fetches,
 * loads, stores and read-modify-writes all appear, over a heap, a stack and code footprint of
 * a few pages. No libc calls inside the measured work, so the trace barely depends on the
 * C library version.
 *
 * Usage: sortprog [N]   (default 2000 elements; the exit status is a checksum, mod 256)
 */
#include <stdint.h>
#include <stdlib.h>

static uint32_t rng_state = 12345u;

static uint32_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static void quicksort(uint32_t *a, long lo, long hi)
{
    while (lo < hi) {
        uint32_t pivot = a[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                uint32_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        /* Recurse into the smaller half, loop on the larger one. */
        if (j - lo < hi - i) {
            quicksort(a, lo, j);
            lo = i;
        } else {
            quicksort(a, i, hi);
            hi = j;
        }
    }
}

struct slot {
    uint32_t key;
    uint32_t count;
};

static unsigned long hash_insert(struct slot *table, unsigned long mask, uint32_t key)
{
    unsigned long h = (key * 2654435761u) & mask;
    while (table[h].count != 0 && table[h].key != key)
        h = (h + 1) & mask;
    table[h].key = key;
    table[h].count++;
    return h;
}

static uint32_t hash_lookup(const struct slot *table, unsigned long mask, uint32_t key)
{
    unsigned long h = (key * 2654435761u) & mask;
    while (table[h].count != 0) {
        if (table[h].key == key)
            return table[h].count;
        h = (h + 1) & mask;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000;
    if (n < 1)
        n = 1;
    uint32_t *keys = malloc(sizeof *keys * (size_t)n);
    unsigned long size = 1;
    while (size < 2 * (unsigned long)n)
        size <<= 1;
    struct slot *table = calloc(size, sizeof *table);
    if (keys == NULL || table == NULL)
        return 1;

    for (long i = 0; i < n; i++)
        keys[i] = next_random() % (uint32_t)(4 * n);
    quicksort(keys, 0, n - 1);

    uint32_t sum = 0;
    for (long i = 0; i < n; i++)
        hash_insert(table, size - 1, keys[i]);
    for (long i = 0; i < n; i++)
        sum += hash_lookup(table, size - 1, keys[i]) * keys[i];

    free(table);
    free(keys);
    return (int)(sum & 0xff);
}
