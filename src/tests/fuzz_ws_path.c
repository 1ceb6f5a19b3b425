/* fuzz_ws_path.c: libFuzzer target for glsb-confine's path validator and hex
 * decoder (src/confine/ws_path.c); aborts on any broken invariant. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static struct glsb_ws_path pp;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exact-size copy so ASan catches any read past the end. */
	char *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	enum glsb_ws_path_err e = glsb_ws_path_split(p, size, &pp);
	CHECK(glsb_ws_path_code(e) != NULL && glsb_ws_path_message(e) != NULL);
	if (e == GLSB_WS_PATH_OK) {
		/* Accepted: relative, no NUL, components are plain names, and joining
		 * them with '/' gives back exactly the input. */
		CHECK(size > 0 && size < GLSB_WS_PATH_MAX && p[0] != '/' && !memchr(p, '\0', size));
		CHECK(pp.ncomp >= 1 && pp.ncomp <= GLSB_WS_MAX_COMPONENTS);
		size_t at = 0;
		for (size_t i = 0; i < pp.ncomp; i++) {
			const char *c = glsb_ws_path_comp(&pp, i);
			size_t n = strlen(c);
			CHECK(n > 0 && n <= GLSB_WS_NAME_MAX && !memchr(c, '/', n));
			CHECK(strcmp(c, ".") && strcmp(c, ".."));
			CHECK(glsb_ws_name_check(c, n) == GLSB_WS_PATH_OK);
			CHECK(at + n <= size && !memcmp(p + at, c, n));
			at += n;
			if (i + 1 < pp.ncomp) {
				CHECK(p[at] == '/');
				at++;
			}
		}
		CHECK(at == size);
	} else {
		CHECK(pp.ncomp == 0);
		if (size == 0)
			CHECK(e == GLSB_WS_PATH_EMPTY);
		if (memchr(p, '\0', size))
			CHECK(e == GLSB_WS_PATH_NUL);
	}
	/* A single name is valid only if, as a path, it is one component. */
	enum glsb_ws_path_err ne = glsb_ws_name_check(p, size);
	if (ne == GLSB_WS_PATH_OK)
		CHECK(e == GLSB_WS_PATH_OK && pp.ncomp == 1);
	/* Hex: encoding then decoding is the identity; odd length or a non-hex
	 * digit is refused. */
	static const char hex[] = "0123456789abcdef";
	char *h = malloc(2 * size + 1);
	unsigned char *back = malloc(size + 1);
	if (h && back) {
		for (size_t i = 0; i < size; i++) {
			h[2 * i] = hex[(uint8_t)p[i] >> 4];
			h[2 * i + 1] = hex[(uint8_t)p[i] & 15];
		}
		CHECK(glsb_ws_hex_decode(h, 2 * size, back) == (long)size && !memcmp(back, p, size));
		long r = glsb_ws_hex_decode(p, size, back); /* the raw input as hex */
		CHECK(r == -1 || (size % 2 == 0 && r == (long)(size / 2)));
	}
	free(h);
	free(back);
	free(p);
	return 0;
}
