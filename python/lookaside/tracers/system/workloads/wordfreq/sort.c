#include <stdlib.h>
#include <string.h>

#include "wordfreq.h"

static int before(const struct entry *a, const struct entry *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    return a->first < b->first;
}

/* A stable merge sort of v[0..n) using tmp[0..n). */
static void merge_sort(struct entry **v, struct entry **tmp, size_t n)
{
    if (n < 2)
        return;
    size_t half = n / 2;
    merge_sort(v, tmp, half);
    merge_sort(v + half, tmp, n - half);
    size_t i = 0, j = half, k = 0;
    while (i < half && j < n)
        tmp[k++] = before(v[j], v[i]) ? v[j++] : v[i++];
    while (i < half)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

struct entry **sorted_entries(const struct table *t)
{
    struct entry **v = xmalloc(t->size * sizeof *v);
    struct entry **tmp = xmalloc(t->size * sizeof *tmp);
    size_t k = 0;
    for (size_t i = 0; i < t->nslots; i++)
        for (struct entry *e = t->slots[i]; e; e = e->next)
            v[k++] = e;
    merge_sort(v, tmp, k);
    free(tmp);
    return v;
}
