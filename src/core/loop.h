/* loop.h: the poll step's sources: what any part of the core registers to be woken, and the driver hook. */
#ifndef GLSB_LOOP_H
#define GLSB_LOOP_H

#include <poll.h>
#include <stddef.h>

/*
 * A source: anything that can become ready (a finished transfer, a readable fd, a child exit, later a
 * Redis reply). The owner embeds one, gives it a token (glsb_loop_token) and a callback, and registers
 * it; the loop calls done(source, status) and knows nothing else about it (libuv's handles). status is
 * the driver's result for a transfer (a CURLcode) and the poll revents for an fd.
 */
struct glsb_source {
	long long token;
	void (*done)(struct glsb_source *src, int status);
	size_t slot; /* the loop's own: where a watched source sits in its arrays */
};

/* A fresh poll token. */
long long glsb_loop_token(void);
/* Report a token as ready at the end of the current (or next) poll step. */
void glsb_loop_ready(long long token);

/* Watch fd for events (POLLIN, POLLOUT): done(src, revents) runs in each poll step that finds it ready
 * (level triggered) until glsb_loop_remove_fd(src), which is safe from inside done (of any source) and
 * costs O(1). -1 when out of memory. A source is watched at most once at a time. */
int glsb_loop_add_fd(struct glsb_source *src, int fd, short events);
void glsb_loop_remove_fd(struct glsb_source *src);

/*
 * A driver keeps timers the loop cannot see as fds (libcurl's multi handle: its sockets are sources like
 * any fd, behind one epoll set; its timeouts are not). timeout_ms() says how long the poll may sleep for
 * it (-1: no limit); step() runs what is due and reports what finished through its sources. Without a
 * driver there is no such timer, so a script that never makes a request never loads the HTTP stack.
 */
struct glsb_loop_driver {
	void (*step)(void);
	int (*timeout_ms)(void);
};
void glsb_loop_set_driver(const struct glsb_loop_driver *driver);

/* Ctrl-C (glsb-lua): glsb_loop_interrupt, async-signal-safe, makes the poll step raise "interrupted!"
 * before it hands out anything (a safe point for the scheduler). glsb_loop_interrupted clears the
 * request and says whether there was one. */
/* Raises this process's soft RLIMIT_NOFILE to its hard limit, once, as Go's runtime does at start
 * (1.19+): a transfer holds a socket and a local sandbox five descriptors (its pipes, fd3, pidfd), and
 * a thousand of either need more than the usual soft limit of 1024. select(2) is used nowhere here. */
void glsb_raise_fd_limit(void);

void glsb_loop_interrupt(void);
int glsb_loop_interrupted(void);

#endif
