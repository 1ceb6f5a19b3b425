/* codes.h: every failure code glsb.core can report, named once (core.codes in Lua lists them all). */
#ifndef GLSB_CODES_H
#define GLSB_CODES_H

#include <lua.h>

/*
 * glsb's own codes (framers, the HTTP layer, the loop, archives, codecs, files). A new code is one line
 * here; its verdict (transient, permanent or no claim) goes in lua/glsb/errors.lua, and
 * spec/core/codes_spec.lua fails until it is there. Failures of libcurl and of system calls keep the
 * names their libraries give them (see glsb_curl_code, glsb_errno_code).
 */
#define GLSB_CODES(X)                                                                                   \
	X(OUT_OF_MEMORY)      /* an allocation failed while decoding or storing a response */            \
	X(FRAME_TOO_LARGE)    /* a line, event, envelope or message is larger than max_frame */           \
	X(TRUNCATED_ENVELOPE) /* the body ended inside a Connect envelope */                              \
	X(TRUNCATED_MESSAGE)  /* the body ended inside an AWS event-stream message */                      \
	X(PRELUDE_CRC)        /* event stream: the prelude checksum does not match */                      \
	X(MESSAGE_CRC)        /* event stream: the message checksum does not match */                      \
	X(BAD_LENGTH)         /* event stream: lengths that cannot describe a message */                    \
	X(BAD_HEADERS)        /* event stream: a header block that does not parse */                       \
	X(BODY_TOO_LARGE)     /* a buffered body grew past max_body */                                     \
	X(IDLE_TIMEOUT)       /* no byte either way for idle_timeout seconds (libcurl's low-speed check) */ \
	X(NOT_RESENT)         /* a reused connection died; the request is not idempotent, so not re-sent */\
	X(HTTP_SETUP_FAILED)  /* libcurl could not create or start the transfer */                        \
	X(POLL_FAILED)        /* the loop's wait itself failed */                                          \
	X(TAR_CORRUPT)        /* not a tar / tar.gz archive, or it breaks off */                           \
	X(TAR_UNSAFE_ENTRY)   /* an entry an unpacker must refuse (name, type, link target) */             \
	X(TAR_TOO_LARGE)      /* more bytes or entries than the limits */                                 \
	X(TAR_WRITE_FAILED)   /* libarchive could not write the archive */                                 \
	X(BAD_BASE64)         /* a character outside the alphabet, or padding that ends no quantum */      \
	X(TREE_CHANGED)       /* rmtree: a directory was swapped for another while it was being removed */ \
	X(BAD_HEADER_VALUE)   /* a request header or the URL holds CR, LF or NUL: refused, nothing sent */

enum glsb_code {
	GLSB_NO_CODE = 0,
#define GLSB_CODE_ENUM(name) GLSB_##name,
	GLSB_CODES(GLSB_CODE_ENUM)
#undef GLSB_CODE_ENUM
};

/* The name of one of glsb's own codes ("FRAME_TOO_LARGE"); NULL for GLSB_NO_CODE. */
const char *glsb_code_name(enum glsb_code code);
/* libcurl's name of a CURLcode without the CURLE_ prefix ("COULDNT_CONNECT", "HTTP2_STREAM"), or
 * "CURL_OTHER" for a code newer than this table. */
const char *glsb_curl_code(int curlcode);
/* The errno name ("ENOENT", "EAGAIN"), or "EOTHER" for one this table does not list. */
const char *glsb_errno_code(int err);
/* Pushes nil, "<what>: <path>: <strerror>", the errno name: the failure shape of every entry point. */
int glsb_push_errno(lua_State *L, const char *what, const char *path, int err);
/* Pushes nil, message, code. */
int glsb_push_failure(lua_State *L, const char *message, const char *code);

#endif
