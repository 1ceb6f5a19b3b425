/* codec.h: the byte-level codecs of codec.c that C code (and the C tests) call directly. */
#ifndef GLSB_CODEC_H
#define GLSB_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint32_t h[8];
	uint64_t len;         /* bytes hashed so far */
	unsigned char buf[64];
	size_t fill;          /* bytes waiting in buf */
} glsb_sha256_ctx;

void glsb_sha256_init(glsb_sha256_ctx *c);
void glsb_sha256_update(glsb_sha256_ctx *c, const void *data, size_t n);
void glsb_sha256_final(glsb_sha256_ctx *c, unsigned char out[32]);
void glsb_sha256(const void *data, size_t n, unsigned char out[32]);

/* IEEE 802.3 CRC-32 as zlib's crc32(): pass the previous result as crc to continue. */
uint32_t glsb_crc32(uint32_t crc, const void *data, size_t n);

#endif
