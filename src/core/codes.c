/* codes.c: the one table of failure codes (glsb's own, libcurl's, errno's) and the failure shape. */
#include <errno.h>
#include <string.h>

#include <curl/curl.h>

#include "codes.h"
#include "core.h"

static const char *const glsb_names[] = {
	NULL,
#define GLSB_CODE_NAME(name) #name,
	GLSB_CODES(GLSB_CODE_NAME)
#undef GLSB_CODE_NAME
};

const char *glsb_code_name(enum glsb_code code)
{
	if ((size_t)code >= sizeof glsb_names / sizeof glsb_names[0])
		return NULL;
	return glsb_names[code];
}

/* Every CURLcode libcurl 7.88 defines that is not marked obsolete (include/curl/curl.h). */
#define CURL_CODES(X)                                                                                   \
	X(UNSUPPORTED_PROTOCOL) X(FAILED_INIT) X(URL_MALFORMAT) X(NOT_BUILT_IN) X(COULDNT_RESOLVE_PROXY)    \
	X(COULDNT_RESOLVE_HOST) X(COULDNT_CONNECT) X(WEIRD_SERVER_REPLY) X(REMOTE_ACCESS_DENIED)             \
	X(FTP_ACCEPT_FAILED) X(FTP_WEIRD_PASS_REPLY) X(FTP_ACCEPT_TIMEOUT) X(FTP_WEIRD_PASV_REPLY)           \
	X(FTP_WEIRD_227_FORMAT) X(FTP_CANT_GET_HOST) X(HTTP2) X(FTP_COULDNT_SET_TYPE) X(PARTIAL_FILE)        \
	X(FTP_COULDNT_RETR_FILE) X(QUOTE_ERROR) X(HTTP_RETURNED_ERROR) X(WRITE_ERROR) X(UPLOAD_FAILED)       \
	X(READ_ERROR) X(OUT_OF_MEMORY) X(OPERATION_TIMEDOUT) X(FTP_PORT_FAILED) X(FTP_COULDNT_USE_REST)      \
	X(RANGE_ERROR) X(HTTP_POST_ERROR) X(SSL_CONNECT_ERROR) X(BAD_DOWNLOAD_RESUME)                        \
	X(FILE_COULDNT_READ_FILE) X(LDAP_CANNOT_BIND) X(LDAP_SEARCH_FAILED) X(FUNCTION_NOT_FOUND)            \
	X(ABORTED_BY_CALLBACK) X(BAD_FUNCTION_ARGUMENT) X(INTERFACE_FAILED) X(TOO_MANY_REDIRECTS)            \
	X(UNKNOWN_OPTION) X(SETOPT_OPTION_SYNTAX) X(GOT_NOTHING) X(SSL_ENGINE_NOTFOUND)                      \
	X(SSL_ENGINE_SETFAILED) X(SEND_ERROR) X(RECV_ERROR) X(SSL_CERTPROBLEM) X(SSL_CIPHER)                 \
	X(PEER_FAILED_VERIFICATION) X(BAD_CONTENT_ENCODING) X(FILESIZE_EXCEEDED) X(USE_SSL_FAILED)           \
	X(SEND_FAIL_REWIND) X(SSL_ENGINE_INITFAILED) X(LOGIN_DENIED) X(TFTP_NOTFOUND) X(TFTP_PERM)           \
	X(REMOTE_DISK_FULL) X(TFTP_ILLEGAL) X(TFTP_UNKNOWNID) X(REMOTE_FILE_EXISTS) X(TFTP_NOSUCHUSER)       \
	X(SSL_CACERT_BADFILE) X(REMOTE_FILE_NOT_FOUND) X(SSH) X(SSL_SHUTDOWN_FAILED) X(AGAIN)                \
	X(SSL_CRL_BADFILE) X(SSL_ISSUER_ERROR) X(FTP_PRET_FAILED) X(RTSP_CSEQ_ERROR) X(RTSP_SESSION_ERROR)   \
	X(FTP_BAD_FILE_LIST) X(CHUNK_FAILED) X(NO_CONNECTION_AVAILABLE) X(SSL_PINNEDPUBKEYNOTMATCH)          \
	X(SSL_INVALIDCERTSTATUS) X(HTTP2_STREAM) X(RECURSIVE_API_CALL) X(AUTH_ERROR) X(HTTP3)                \
	X(QUIC_CONNECT_ERROR) X(PROXY) X(SSL_CLIENTCERT) X(UNRECOVERABLE_POLL)

static const struct {
	int code;
	const char *name;
} curl_names[] = {
#define CURL_CODE_ENTRY(name) {CURLE_##name, #name},
	CURL_CODES(CURL_CODE_ENTRY)
#undef CURL_CODE_ENTRY
};

const char *glsb_curl_code(int curlcode)
{
	for (size_t i = 0; i < sizeof curl_names / sizeof curl_names[0]; i++)
		if (curl_names[i].code == curlcode)
			return curl_names[i].name;
	return "CURL_OTHER";
}

/* The errno values the core's system calls (files, pipes, processes, poll) can fail with. */
#define ERRNO_CODES(X)                                                                                  \
	X(EPERM) X(ENOENT) X(ESRCH) X(EINTR) X(EIO) X(ENXIO) X(E2BIG) X(ENOEXEC) X(EBADF) X(ECHILD)         \
	X(EAGAIN) X(ENOMEM) X(EACCES) X(EFAULT) X(EBUSY) X(EEXIST) X(EXDEV) X(ENODEV) X(ENOTDIR) X(EISDIR)  \
	X(EINVAL) X(ENFILE) X(EMFILE) X(ETXTBSY) X(EFBIG) X(ENOSPC) X(ESPIPE) X(EROFS) X(EMLINK) X(EPIPE)   \
	X(ERANGE) X(ENAMETOOLONG) X(ENOSYS) X(ENOTEMPTY) X(ELOOP) X(EOVERFLOW) X(EOPNOTSUPP) X(EDQUOT)      \
	X(ESTALE) X(ECONNREFUSED) X(ECONNRESET) X(ETIMEDOUT) X(EHOSTUNREACH) X(ENETUNREACH) X(ECANCELED)

static const struct {
	int err;
	const char *name;
} errno_names[] = {
#define ERRNO_ENTRY(name) {name, #name},
	ERRNO_CODES(ERRNO_ENTRY)
#undef ERRNO_ENTRY
};

const char *glsb_errno_code(int err)
{
	if (err == EWOULDBLOCK)
		return "EAGAIN";
	for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	return "EOTHER";
}

int glsb_push_failure(lua_State *L, const char *message, const char *code)
{
	lua_pushnil(L);
	lua_pushstring(L, message);
	lua_pushstring(L, code);
	return 3;
}

int glsb_push_errno(lua_State *L, const char *what, const char *path, int err)
{
	lua_pushnil(L);
	if (path)
		lua_pushfstring(L, "%s: %s: %s", what, path, strerror(err));
	else
		lua_pushfstring(L, "%s: %s", what, strerror(err));
	lua_pushstring(L, glsb_errno_code(err));
	return 3;
}

/* core.codes: {NAME = "glsb" | "curl" | "errno"}, every code a failure from the core can carry. */
void glsb_open_codes(lua_State *L)
{
	lua_createtable(L, 0, 160);
	for (size_t i = 0; i < sizeof curl_names / sizeof curl_names[0]; i++) {
		lua_pushliteral(L, "curl");
		lua_setfield(L, -2, curl_names[i].name);
	}
	lua_pushliteral(L, "curl");
	lua_setfield(L, -2, "CURL_OTHER");
	for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++) {
		lua_pushliteral(L, "errno");
		lua_setfield(L, -2, errno_names[i].name);
	}
	lua_pushliteral(L, "errno");
	lua_setfield(L, -2, "EOTHER");
	/* last, so a name both libcurl and glsb use (OUT_OF_MEMORY, same meaning) lists as glsb's */
	for (size_t i = 1; i < sizeof glsb_names / sizeof glsb_names[0]; i++) {
		lua_pushliteral(L, "glsb");
		lua_setfield(L, -2, glsb_names[i]);
	}
	lua_setfield(L, -2, "codes");
}
