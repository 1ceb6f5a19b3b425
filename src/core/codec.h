/* codec.h: the byte-level codecs of codec.c that C code (and the C tests) call directly. */
#ifndef GLSB_CODEC_H
#define GLSB_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 over libcrypto's EVP. Every call returns 0, or -1 when libcrypto failed (it can only fail
 * to allocate). init allocates: final (or abort, when the hash is abandoned) frees, also on failure. */
typedef struct {
	void *md; /* EVP_MD_CTX *, kept opaque so includers need no OpenSSL header */
} glsb_sha256_ctx;

int glsb_sha256_init(glsb_sha256_ctx *c);
int glsb_sha256_update(glsb_sha256_ctx *c, const void *data, size_t n);
int glsb_sha256_final(glsb_sha256_ctx *c, unsigned char out[32]);
void glsb_sha256_abort(glsb_sha256_ctx *c);
int glsb_sha256(const void *data, size_t n, unsigned char out[32]);
/* HMAC-SHA256 (RFC 2104 with SHA-256), any key length. */
int glsb_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, unsigned char out[32]);

/* IEEE 802.3 CRC-32 as zlib's crc32(): pass the previous result as crc to continue. */
uint32_t glsb_crc32(uint32_t crc, const void *data, size_t n);

#endif
