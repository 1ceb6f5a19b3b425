/* multi.c: the loop's transfer driver: one curl multi handle on an epoll set; a finished transfer calls its own source. */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "multi.h"

/*
 * libcurl's socket interface (curl_multi_socket_action): libcurl says which of its sockets to watch
 * for what (socket_cb) and when it next needs a timeout call (timer_cb); we call it for the sockets
 * that are ready and for the timer when it falls due. Its sockets sit in one epoll set that is a
 * single source of the loop, so a step costs what is ready, not what is open: with a thousand
 * transfers in flight, curl_multi_perform + curl_multi_poll visited every transfer and polled every
 * socket on each step: 0.715 ms of CPU per request, now 0.080 (bench/scale_http.lua).
 */

/* One multi handle per process: glsb is single-threaded and every Lua state shares the connection cache. */
static CURLM *multi;
static int epfd = -1;
static struct glsb_source sockets_src; /* the epoll set, watched by the loop */
static long long timer_due_ns = -1;    /* when libcurl wants curl_multi_socket_action(TIMEOUT); -1: never */

/*
 * Connections kept for reuse. libcurl's cache holds up to 4 per transfer in the multi handle and closes
 * at most one per transfer that ends, so a burst of a thousand calls left hundreds of idle sockets open
 * until later requests pruned them (never, if none came). The limit here is one per transfer in flight,
 * at least IDLE_CONNECTIONS: during a burst every transfer hands its connection to the next call; once
 * the multi handle is empty with more than IDLE_CONNECTIONS sockets still open, it is replaced, which
 * closes them all (libcurl has no call that closes only some idle connections).
 */
#define IDLE_CONNECTIONS 64L
static long in_multi;     /* transfers added and not yet removed */
static long open_sockets; /* sockets libcurl opened and has not closed (its open/close callbacks) */

static void set_connection_limit(void)
{
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, in_multi > IDLE_CONNECTIONS ? in_multi : IDLE_CONNECTIONS);
}

/* libcurl's sockets, opened and closed here to be counted; close-on-exec, which libcurl 7.88 does not
 * ask for (our spawns close every fd beyond stdio anyway). */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
	(void)clientp;
	(void)purpose;
	curl_socket_t s = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
	if (s != CURL_SOCKET_BAD)
		open_sockets++;
	return s;
}

static int close_socket(void *clientp, curl_socket_t s)
{
	(void)clientp;
	open_sockets--;
	return close(s);
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int multi_init(void);

/* After a burst: an empty multi handle holding many idle connections is replaced, closing them. */
static void trim_connections(void)
{
	if (in_multi > 0 || open_sockets <= IDLE_CONNECTIONS)
		return;
	curl_multi_cleanup(multi); /* closes every cached connection through close_socket */
	multi = NULL;
	multi_init(); /* on failure the next request tries again */
#ifdef __GLIBC__
	/* The burst's buffers went back to malloc; hand the free pages back to the kernel too (2-3 ms after
	 * a thousand transfers: 46 MB resident afterwards without it, 30 MB with). */
	malloc_trim(0);
#endif
}

/* Finished transfers: each leaves the multi handle, then its source hears how it ended. */
static void report_done(void)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(multi, &left))) {
		struct glsb_source *src = NULL;
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *easy = msg->easy_handle;
		CURLcode rc = msg->data.result;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&src);
		curl_multi_remove_handle(multi, easy); /* msg is invalid from here on */
		in_multi--;
		set_connection_limit();
		if (src)
			src->done(src, (int)rc);
	}
	trim_connections();
}

static void socket_action(curl_socket_t s, int ev)
{
	int running;
	curl_multi_socket_action(multi, s, ev, &running);
}

/* What libcurl wants watched on socket s (CURLMOPT_SOCKETFUNCTION). It says CURL_POLL_REMOVE before it
 * closes a socket, so the set never holds a closed (or reused) fd of libcurl's. */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	(void)easy;
	(void)userp;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, s, NULL);
		return 0;
	}
	struct epoll_event ev = {0};
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	ev.data.fd = s;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, s, &ev) == 0)
		return 0;
	if (errno == ENOENT && epoll_ctl(epfd, EPOLL_CTL_ADD, s, &ev) == 0)
		return 0;
	return -1; /* libcurl fails the transfers on this socket (out of memory, fd limits) */
}

/* When libcurl next needs a timeout call (CURLMOPT_TIMERFUNCTION): -1 none, 0 as soon as possible. */
static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	(void)m;
	(void)userp;
	timer_due_ns = timeout_ms < 0 ? -1 : now_ns() + (long long)timeout_ms * 1000000LL;
	return 0;
}

/* The epoll set is readable: act on each ready socket. A socket closed by an earlier action in the
 * same batch is one libcurl no longer knows; it ignores the call. */
static void sockets_ready(struct glsb_source *src, int revents)
{
	(void)src;
	(void)revents;
	struct epoll_event evs[256];
	int n = epoll_wait(epfd, evs, (int)(sizeof evs / sizeof evs[0]), 0);
	for (int i = 0; i < n; i++) {
		uint32_t e = evs[i].events;
		int ev = ((e & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) ? CURL_CSELECT_IN : 0) |
			 ((e & EPOLLOUT) ? CURL_CSELECT_OUT : 0) | ((e & EPOLLERR) ? CURL_CSELECT_ERR : 0);
		socket_action(evs[i].data.fd, ev);
	}
	report_done();
}

static void multi_step(void)
{
	if (!multi)
		return;
	if (timer_due_ns >= 0 && now_ns() >= timer_due_ns) {
		timer_due_ns = -1; /* the call may set a new one */
		socket_action(CURL_SOCKET_TIMEOUT, 0);
	}
	report_done();
}

static int multi_timeout_ms(void)
{
	if (timer_due_ns < 0)
		return -1;
	long long left = timer_due_ns - now_ns();
	if (left <= 0)
		return 0;
	long long ms = (left + 999999) / 1000000;
	return ms > 86400000 ? 86400000 : (int)ms;
}

static const struct glsb_loop_driver driver = {multi_step, multi_timeout_ms};

/* The epoll set and the loop's hooks once per process; a multi handle now (and again after a trim). */
static int multi_init(void)
{
	if (epfd < 0) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -1;
		if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
			return -1;
		sockets_src.token = glsb_loop_token();
		sockets_src.done = sockets_ready;
		if (glsb_loop_add_fd(&sockets_src, epfd, POLLIN) != 0) {
			close(epfd);
			epfd = -1;
			return -1;
		}
		glsb_raise_fd_limit(); /* a socket per transfer */
		glsb_loop_set_driver(&driver);
	}
	if (!(multi = curl_multi_init()))
		return -1;
	timer_due_ns = -1;
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	set_connection_limit();
	return 0;
}

int glsb_multi_add(CURL *easy, struct glsb_source *src)
{
	if (!multi && multi_init() != 0)
		return -1;
	curl_easy_setopt(easy, CURLOPT_PRIVATE, (char *)src);
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
	if (curl_multi_add_handle(multi, easy) != CURLM_OK)
		return -1;
	in_multi++;
	set_connection_limit();
	return 0;
}

/* Only for a transfer that has not ended (an ended one left the multi handle in report_done). */
void glsb_multi_remove(CURL *easy)
{
	if (multi && curl_multi_remove_handle(multi, easy) == CURLM_OK) {
		in_multi--;
		set_connection_limit();
		trim_connections(); /* a burst that ends cancelled */
	}
}
