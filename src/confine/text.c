/* text.c: bounded messages and word lists, for every glsb-confine command. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

int glsb_fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
	return n;
}

int glsb_has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t')
			p++;
		const char *start = p;
		while (*p && *p != ' ' && *p != ',' && *p != '\n' && *p != '\t')
			p++;
		if ((size_t)(p - start) == wl && !memcmp(start, word, wl))
			return 1;
	}
	return 0;
}
