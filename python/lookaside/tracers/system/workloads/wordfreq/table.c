#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wordfreq.h"

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("wordfreq: out of memory\n", stderr);
        exit(2);
    }
    return p;
}

/* FNV-1a, 64 bits. */
unsigned long hash_word(const char *word, size_t n)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)word[i];
        h *= 0x100000001b3ULL;
    }
    return (unsigned long)h;
}

void table_init(struct table *t)
{
    t->nslots = 16;
    t->size = 0;
    t->words = 0;
    t->slots = xmalloc(t->nslots * sizeof *t->slots);
    memset(t->slots, 0, t->nslots * sizeof *t->slots);
}

static void grow(struct table *t)
{
    size_t n = t->nslots * 2;
    struct entry **slots = xmalloc(n * sizeof *slots);
    memset(slots, 0, n * sizeof *slots);
    for (size_t i = 0; i < t->nslots; i++) {
        struct entry *e = t->slots[i], *next;
        for (; e; e = next) {
            next = e->next;
            size_t j = hash_word(e->word, strlen(e->word)) & (n - 1);
            e->next = slots[j];
            slots[j] = e;
        }
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
}

void table_add(struct table *t, const char *word, size_t n)
{
    size_t i = hash_word(word, n) & (t->nslots - 1);
    t->words++;
    for (struct entry *e = t->slots[i]; e; e = e->next) {
        if (strncmp(e->word, word, n) == 0 && e->word[n] == '\0') {
            e->count++;
            return;
        }
    }
    struct entry *e = xmalloc(sizeof *e);
    e->word = xmalloc(n + 1);
    memcpy(e->word, word, n);
    e->word[n] = '\0';
    e->count = 1;
    e->first = t->size;
    e->next = t->slots[i];
    t->slots[i] = e;
    if (++t->size > t->nslots)
        grow(t);
}

void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nslots; i++) {
        struct entry *e = t->slots[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e->word);
            free(e);
        }
    }
    free(t->slots);
}
