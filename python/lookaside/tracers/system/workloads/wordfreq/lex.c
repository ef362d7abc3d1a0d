#include <ctype.h>
#include <string.h>

#include "wordfreq.h"

static int word_start(int c)
{
    return isalpha(c) || c == '_';
}

static int word_char(int c)
{
    return isalnum(c) || c == '_';
}

/* Skips a comment or a string or character literal at buf[*pos], if there is one. */
static int skip_noise(const char *buf, size_t len, size_t *pos)
{
    size_t i = *pos;
    if (buf[i] == '/' && i + 1 < len && buf[i + 1] == '*') {
        for (i += 2; i + 1 < len && !(buf[i] == '*' && buf[i + 1] == '/'); i++)
            ;
        *pos = i + 2 < len ? i + 2 : len;
        return 1;
    }
    if (buf[i] == '/' && i + 1 < len && buf[i + 1] == '/') {
        while (i < len && buf[i] != '\n')
            i++;
        *pos = i;
        return 1;
    }
    if (buf[i] == '"' || buf[i] == '\'') {
        char quote = buf[i];
        for (i++; i < len && buf[i] != quote && buf[i] != '\n'; i++)
            if (buf[i] == '\\' && i + 1 < len)
                i++;
        *pos = i < len ? i + 1 : len;
        return 1;
    }
    return 0;
}

size_t next_word(const char *buf, size_t len, size_t *pos, char *out, size_t cap)
{
    while (*pos < len) {
        unsigned char c = (unsigned char)buf[*pos];
        if (skip_noise(buf, len, pos))
            continue;
        if (word_start(c) || isdigit(c)) {
            size_t n = 0;
            while (*pos < len && word_char((unsigned char)buf[*pos])) {
                if (n + 1 < cap)
                    out[n++] = buf[*pos];
                (*pos)++;
            }
            out[n] = '\0';
            return n;
        }
        (*pos)++;
    }
    return 0;
}
