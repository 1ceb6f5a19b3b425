/* text.h: bounded messages and word lists, for every glsb-confine command. */
#ifndef GLSB_TEXT_H
#define GLSB_TEXT_H

#include <stddef.h>

/* snprintf that callers use where truncation is acceptable (messages, bounded paths that are
 * checked by the call that uses them). Returns what snprintf returns. */
int glsb_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 if the whitespace/comma separated list contains word. */
int glsb_has_word(const char *list, const char *word);

#endif
