/*
 * wordfreq: counts the words (C identifiers and numbers) of its input files and prints the
 * most frequent ones. The compile workload builds it from these files with tcc inside the
 * guest, then runs it over its own source. Usage: wordfreq TOP FILE...
 */
#ifndef WORDFREQ_H
#define WORDFREQ_H

#include <stddef.h>

/* One distinct word and how often it appeared. */
struct entry {
    char *word;
    unsigned long count;
    unsigned long first; /* ordinal of its first appearance: ties sort by it */
    struct entry *next;  /* hash chain */
};

/* A chained hash table that doubles when its load reaches 1. */
struct table {
    struct entry **slots;
    size_t nslots, size;
    unsigned long words; /* every word added, repeats included */
};

/* lex.c: the next word of buf[*pos..len) into out (at most cap - 1 bytes, NUL-terminated);
 * returns its length, 0 at the end. Comments and string literals are skipped. */
size_t next_word(const char *buf, size_t len, size_t *pos, char *out, size_t cap);

/* table.c */
void table_init(struct table *t);
void table_add(struct table *t, const char *word, size_t n);
void table_free(struct table *t);
unsigned long hash_word(const char *word, size_t n);

/* sort.c: the table's entries as an array, most frequent first (ties: first seen first);
 * the caller frees the array. */
struct entry **sorted_entries(const struct table *t);

/* Aborts with a message when memory runs out. */
void *xmalloc(size_t n);

#endif
