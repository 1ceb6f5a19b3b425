/* sb_control.c: the supervisor's side of the control channel (CONTROL.md): reads framed
 * requests from the host, runs each call in a confined child (sb_call.c), feeds it its stdin,
 * and relays its stdout, stderr and status as framed replies. One call at a time; bounded
 * buffers in both directions; never blocks the supervisor. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "sb.h"
#include "text.h"

#define HEADER_MAX 256
#define MAX_ARGS 4096
#define MAX_ARGBYTES (1 << 20)
#define MAX_STDIN (1ULL << 40)
#define CHUNK 65536
#define SPLICE_MAX (1 << 20)   /* stdin bytes moved socket -> pipe per splice(2) */
#define PIPE_SIZE (1 << 20)    /* a large stdin's pipe, a read's stdout pipe (F_SETPIPE_SZ) */
#define FRAME_MAX (1 << 20)    /* a spliced stdout frame: at most this many bytes */
#define OUT_HIGH (1 << 20)     /* replies not yet read by the host: stop relaying above this */
#define STDERR_RELAYED 65536   /* per call; the rest is counted */
#define KILL_AFTER_MS 2000     /* after a cancel's SIGTERM */

enum in_state { IN_HEADER, IN_ARGS, IN_STDIN, IN_FILES, IN_CLOSED };

/* The channel's whole state: a supervisor serves one channel, so it is one file-scope value,
 * `chan` (every use reads chan.<field>). */
static struct control_channel {
	int in, out;          /* the channel; -1 when closed */
	int report_fd;        /* the report's descriptor (may be out): not ours to close */
	enum in_state state;
	char header[HEADER_MAX + 1];
	size_t hlen;
	/* the request being read */
	unsigned long long id, nargs, argbytes, stdin_left;
	char *args;
	size_t args_len;
	int refused; /* its stdin bytes are read and dropped */
	unsigned char stage[CHUNK]; /* stdin bytes read from the host, not yet in the pipe */
	size_t stage_len, stage_off;
	int no_splice;  /* splice(2) socket -> pipe failed once: stdin bytes are copied through stage */
	int wait_pipe;  /* the last splice found the call's stdin pipe full: wait for it, not the host */
	/* replies */
	struct glsb_jbuf reply;
	size_t reply_off;
	/* a stdout frame on its way by splice(2) pipe -> channel: its header, then sf_left bytes
	 * taken straight from the call's stdout pipe (they were there when the header was made).
	 * It goes before everything in reply (a frame is started only when reply is empty). */
	char sf_head[96];
	size_t sf_head_len, sf_head_off;
	unsigned long long sf_left;
	int no_out_splice; /* splice(2) pipe -> channel failed once: stdout frames are copied */
	/* the call */
	pid_t pid;            /* -1: none */
	unsigned long long call_id;
	int fd_in, fd_out, fd_err; /* our ends of its stdio pipes */
	int status, reaped;
	unsigned long long err_relayed, err_dropped;
	long oom_before;
	long long kill_at_ms; /* SIGKILL deadline after a cancel, or 0 */
} chan = {.in = -1, .out = -1, .report_fd = -1, .pid = -1, .fd_in = -1, .fd_out = -1, .fd_err = -1};

/* The file server (ws_serve.c: `files` requests): a long-lived confined child made as a call's, started
 * by the first request and ended with the sandbox. One request at a time: its frame goes to the
 * server's stdin, its one answer (a JSON line with "len", then that many bytes) comes back whole and is
 * relayed as it is. An answer that is not one (too long, another id, bytes after it) ends the server;
 * the next request starts another. */
#define FILES_REQ_MAX GLSB_FILES_REQUEST_MAX
#define FILES_HEAD_MAX 4096
#define FILES_DATA_MAX GLSB_FILES_DATA_MAX
static struct file_server {
	pid_t pid;               /* -1: none */
	int in, out;             /* our ends of its stdin and stdout */
	int busy;                /* a request was given to it and is not answered yet */
	unsigned long long id;   /* that request's id */
	char *req;               /* what is still to go to its stdin: "ID LEN\n" and the body */
	size_t req_len, req_off;
	struct glsb_jbuf ans;    /* its answer so far */
	size_t ans_total;        /* once its line is complete: the answer's whole length */
	/* the host's request being read: LEN bytes into body (after room for the frame's header) */
	char *body;
	size_t body_len, body_need;
	/* a descriptor that came with the answer (`open`: SCM_RIGHTS on its stdout, a socket), and one on its
	 * way to the host with the reply byte at relay_off (flush_replies sends it with that byte) */
	int ans_fd, relay_fd;
	size_t relay_off;
} srv = {.pid = -1, .in = -1, .out = -1, .ans_fd = -1, .relay_fd = -1};

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* --- replies ------------------------------------------------------------------------------ */

static size_t reply_pending(void)
{
	return chan.reply.len - chan.reply_off;
}

static void reply_line(struct glsb_jbuf *line)
{
	glsb_jbuf_put(line, "\n", 1);
	if (!line->failed)
		glsb_jbuf_put(&chan.reply, line->p, line->len);
	glsb_jbuf_free(line);
}

static void reply_data(const char *ev, const void *data, size_t n)
{
	struct glsb_jbuf line = {0};
	glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"%s\",\"len\":%zu}", chan.call_id, ev, n);
	reply_line(&line);
	glsb_jbuf_put(&chan.reply, data, n);
}

static void reply_error(unsigned long long id, const char *code, const char *msg)
{
	struct glsb_jbuf line = {0};
	glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"error\",\"error\":\"%s\",\"message\":", id, code);
	glsb_json_cstr(&line, msg);
	glsb_jbuf_puts(&line, "}");
	reply_line(&line);
}

static void protocol_error(struct sb *sb, const char *msg)
{
	struct glsb_jbuf line = {0};
	(void)sb;
	glsb_jbuf_puts(&line, "{\"ev\":\"protocol_error\",\"message\":");
	glsb_json_cstr(&line, msg);
	glsb_jbuf_puts(&line, "}");
	reply_line(&line);
	chan.state = IN_CLOSED;
	if (chan.in != chan.out)
		close_fd(&chan.in);
	else
		chan.in = -1; /* the socket stays open for the replies */
}

static int sf_pending(void)
{
	return chan.sf_head_off < chan.sf_head_len || chan.sf_left > 0;
}

static void sf_clear(void)
{
	chan.sf_head_len = chan.sf_head_off = 0;
	chan.sf_left = 0;
}

/* The spliced frame's rest, moved into reply in front of what waits there: when the channel takes
 * no splice, or the call's pipe is about to be closed. Its bytes are in the pipe (counted when the
 * header was made; we are its only reader), so the reads do not wait. */
static void sf_materialize(void)
{
	if (!sf_pending())
		return;
	struct glsb_jbuf nb = {0};
	glsb_jbuf_put(&nb, chan.sf_head + chan.sf_head_off, chan.sf_head_len - chan.sf_head_off);
	unsigned char buf[CHUNK];
	while (chan.sf_left > 0 && chan.fd_out >= 0) {
		ssize_t n = read(chan.fd_out, buf, chan.sf_left < sizeof buf ? (size_t)chan.sf_left : sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		glsb_jbuf_put(&nb, buf, (size_t)n);
		chan.sf_left -= (size_t)n;
	}
	if (chan.sf_left > 0 && chan.out >= 0) {
		/* the pipe did not hold them all (it always does): the frame cannot be completed, and
		 * the host's framing would go out of step. End the channel (the host sees it end)
		 * rather than send bytes that are not the helper's. */
		shutdown(chan.out, SHUT_RDWR);
		if (chan.in == chan.out)
			chan.in = -1;
		if (chan.out == chan.report_fd)
			chan.out = -1; /* the report's: glsb_sb_report_exit closes it */
		else
			close_fd(&chan.out);
		chan.state = IN_CLOSED;
	}
	if (srv.relay_fd >= 0) /* the reply moves behind the frame's rest */
		srv.relay_off = srv.relay_off - chan.reply_off + nb.len;
	glsb_jbuf_put(&nb, chan.reply.p + chan.reply_off, reply_pending());
	glsb_jbuf_free(&chan.reply);
	chan.reply = nb;
	chan.reply_off = 0;
	sf_clear();
}

/* One byte of the reply with a descriptor attached (SCM_RIGHTS) -> 1, or -1 with errno. */
static ssize_t send_with_fd(int sock, const char *byte, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {(void *)byte, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	return sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Write what the host will take. A broken channel drops every later reply. */
static void flush_replies(void)
{
	while (chan.out >= 0 && sf_pending()) {
		ssize_t n;
		if (chan.sf_head_off < chan.sf_head_len)
			n = write(chan.out, chan.sf_head + chan.sf_head_off, chan.sf_head_len - chan.sf_head_off);
		else
			n = splice(chan.fd_out, NULL, chan.out, NULL, chan.sf_left > FRAME_MAX ? FRAME_MAX : (size_t)chan.sf_left,
				   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 && chan.sf_head_off == chan.sf_head_len && (errno == EINVAL || errno == ENOSYS)) {
			chan.no_out_splice = 1; /* copy from now on, this frame's rest too */
			sf_materialize();
			break;
		}
		if (n <= 0) {
			sf_clear();
			if (chan.in == chan.out)
				chan.in = -1;
			close_fd(&chan.out);
			chan.state = IN_CLOSED;
			break;
		}
		if (chan.sf_head_off < chan.sf_head_len)
			chan.sf_head_off += (size_t)n;
		else
			chan.sf_left -= (size_t)n;
		if (!sf_pending())
			sf_clear();
	}
	while (chan.out >= 0 && reply_pending() && !sf_pending()) {
		ssize_t n;
		if (srv.relay_fd >= 0 && srv.relay_off == chan.reply_off) {
			n = send_with_fd(chan.out, chan.reply.p + chan.reply_off, srv.relay_fd);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				close_fd(&srv.relay_fd); /* a channel of pipes takes none: the answer goes without */
				continue;
			}
		} else
			n = write(chan.out, chan.reply.p + chan.reply_off,
				  srv.relay_fd >= 0 && srv.relay_off > chan.reply_off ? srv.relay_off - chan.reply_off
										    : reply_pending());
		if (n > 0 && srv.relay_fd >= 0 && srv.relay_off == chan.reply_off)
			close_fd(&srv.relay_fd); /* it went with its byte */
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (chan.in == chan.out)
				chan.in = -1;
			close_fd(&chan.out);
			chan.state = IN_CLOSED;
			break;
		}
		chan.reply_off += (size_t)n;
	}
	if (chan.reply_off == chan.reply.len || chan.out < 0) {
		chan.reply.len = chan.reply_off = 0;
		close_fd(&srv.relay_fd); /* sent, or nowhere to go */
	}
}

/* --- the call ----------------------------------------------------------------------------- */

static int nonblocking_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	return 0;
}

static void start_call(struct sb *sb)
{
	char *argv[MAX_ARGS + 1], err[256];
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	size_t k = 0;

	for (size_t off = 0; off < chan.args_len && k < chan.nargs; k++) {
		argv[k] = chan.args + off;
		off += strlen(chan.args + off) + 1;
	}
	argv[k] = NULL;
	if (k == 0 || !glsb_sb_call_allowed(argv[0])) {
		reply_error(chan.id, "not_allowed", "the first argument must be write, run, read or pack");
		chan.refused = 1;
		return;
	}
	if (nonblocking_pipe(pin) < 0 || nonblocking_pipe(pout) < 0 || nonblocking_pipe(perr) < 0) {
		glsb_fmt(err, sizeof err, "pipes: %s", strerror(errno));
		goto fail;
	}
	int child_fds[3] = {pin[0], pout[1], perr[1]};
	chan.oom_before = sb->have_cgroup ? glsb_sb_cgroup_oom_kills(&sb->cgroup) : -1;
	chan.pid = glsb_sb_call_start(sb, (int)k, argv, child_fds, err, sizeof err);
	if (chan.pid < 0)
		goto fail;
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	chan.fd_in = pin[1];
	chan.fd_out = pout[0];
	chan.fd_err = perr[0];
	for (int i = 0; i < 3; i++)
		fcntl((int[]){chan.fd_in, chan.fd_out, chan.fd_err}[i], F_SETFL, O_NONBLOCK);
	/* A larger stdin pipe for large stdin: fewer wake-ups of the helper and of us per MiB
	 * moved. Only then: the user's pipe pages count against pipe-user-pages-soft, beyond which
	 * every new pipe of the user gets small. Best effort (a refusal leaves 64 KiB, which works,
	 * only slower). */
	if (chan.stdin_left >= PIPE_SIZE)
		fcntl(chan.fd_in, F_SETPIPE_SZ, PIPE_SIZE);
	if (!strcmp(argv[0], "read")) /* a download: its stdout frames are what the pipe holds */
		fcntl(chan.fd_out, F_SETPIPE_SZ, PIPE_SIZE);
	chan.wait_pipe = 0;
	chan.call_id = chan.id;
	chan.reaped = 0;
	chan.err_relayed = chan.err_dropped = 0;
	chan.kill_at_ms = 0;
	if (chan.stdin_left == 0)
		close_fd(&chan.fd_in);
	return;
fail:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	chan.pid = -1;
	reply_error(chan.id, errno == ENOMEM || !strcmp(err, "the sandbox has ended") ? "sandbox_gone" : "start_failed",
		    err);
	chan.refused = 1;
}

/* The call is over once it was reaped and its output pipes reached end of file. */
static void finish_call_if_done(struct sb *sb)
{
	if (chan.pid < 0 || !chan.reaped || chan.fd_out >= 0 || chan.fd_err >= 0)
		return;
	long oom = sb->have_cgroup ? glsb_sb_cgroup_oom_kills(&sb->cgroup) : -1;
	struct glsb_jbuf line = {0};
	glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"exit\",\"code\":", chan.call_id);
	if (WIFEXITED(chan.status))
		glsb_jbuf_printf(&line, "%d", WEXITSTATUS(chan.status));
	else
		glsb_jbuf_puts(&line, "null");
	glsb_jbuf_puts(&line, ",\"signal\":");
	if (WIFSIGNALED(chan.status))
		glsb_jbuf_printf(&line, "%d", WTERMSIG(chan.status));
	else
		glsb_jbuf_puts(&line, "null");
	glsb_jbuf_printf(&line, ",\"stderr_dropped\":%llu,\"oom_kills\":", chan.err_dropped);
	if (oom >= 0 && chan.oom_before >= 0)
		glsb_jbuf_printf(&line, "%ld}", oom - chan.oom_before);
	else
		glsb_jbuf_puts(&line, "null}");
	reply_line(&line);
	close_fd(&chan.fd_in);
	chan.pid = -1;
}

static void relay(int *fd, const char *ev);

/* Relay the call's stdout: by splice(2), as frames of what the pipe holds (at most FRAME_MAX), the
 * bytes never passing through our memory; copied (relay) where the channel takes no splice or is
 * closed, and to see the end of file. One frame at a time, started when no reply waits (so that it
 * takes its place in order). */
static void relay_stdout(void)
{
	if (chan.no_out_splice || chan.out < 0)
		return relay(&chan.fd_out, "stdout");
	if (sf_pending() || reply_pending())
		return;
	int avail = 0;
	if (ioctl(chan.fd_out, FIONREAD, &avail) < 0 || avail <= 0)
		return relay(&chan.fd_out, "stdout"); /* end of file (or bytes that came just now) */
	chan.sf_left = (unsigned long long)(avail < FRAME_MAX ? avail : FRAME_MAX);
	int hl = snprintf(chan.sf_head, sizeof chan.sf_head, "{\"id\":%llu,\"ev\":\"stdout\",\"len\":%llu}\n",
			  chan.call_id, chan.sf_left);
	chan.sf_head_len = (size_t)hl;
	chan.sf_head_off = 0;
}

/* Relay what the call wrote (stdout only while the host keeps up). 1 at end of file. */
static void relay(int *fd, const char *ev)
{
	unsigned char buf[CHUNK];
	for (;;) {
		if (!strcmp(ev, "stdout") && reply_pending() >= OUT_HIGH)
			return;
		ssize_t n = read(*fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_fd(fd);
			return;
		}
		if (!strcmp(ev, "stderr")) {
			size_t keep = chan.err_relayed >= STDERR_RELAYED ? 0
				      : (size_t)n < STDERR_RELAYED - chan.err_relayed ? (size_t)n
				      : (size_t)(STDERR_RELAYED - chan.err_relayed);
			if (keep)
				reply_data(ev, buf, keep);
			chan.err_relayed += keep;
			chan.err_dropped += (size_t)n - keep;
		} else {
			reply_data(ev, buf, (size_t)n);
		}
	}
}

/* --- the file server ----------------------------------------------------------------------- */

static void server_stop(const char *why)
{
	if (srv.pid > 0) {
		kill(srv.pid, SIGKILL); /* the first child: its helper in the pid namespace dies with it */
		while (waitpid(srv.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	srv.pid = -1;
	close_fd(&srv.in);
	close_fd(&srv.out);
	free(srv.req);
	srv.req = NULL;
	srv.req_len = srv.req_off = 0;
	glsb_jbuf_free(&srv.ans);
	srv.ans_total = 0;
	close_fd(&srv.ans_fd);
	if (srv.busy && why)
		reply_error(srv.id, "server_failed", why);
	srv.busy = 0;
}

static int server_start(struct sb *sb, char *err, size_t errcap)
{
	int pin[2], pout[2];
	if (pipe2(pin, O_CLOEXEC) < 0) {
		glsb_fmt(err, errcap, "pipes: %s", strerror(errno));
		return -1;
	}
	/* its stdout a socket: an `open` answer carries a descriptor */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pout) < 0) {
		glsb_fmt(err, errcap, "pipes: %s", strerror(errno));
		close(pin[0]);
		close(pin[1]);
		return -1;
	}
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	char *argv[] = {"serve", NULL};
	int fds[3] = {pin[0], pout[1], devnull >= 0 ? devnull : pout[1]};
	srv.pid = glsb_sb_call_start(sb, 1, argv, fds, err, errcap);
	close(pin[0]);
	close(pout[1]);
	if (devnull >= 0)
		close(devnull);
	srv.in = pin[1];
	srv.out = pout[0];
	fcntl(srv.in, F_SETFL, O_NONBLOCK);
	fcntl(srv.out, F_SETFL, O_NONBLOCK);
	if (srv.pid < 0) {
		server_stop(NULL);
		return -1;
	}
	return 0;
}

/* The host's request is complete: give it to the server (started now if there is none). */
static void handle_files(struct sb *sb)
{
	char err[256];
	if (srv.busy) {
		reply_error(chan.id, "busy", "another files request is being served");
		return;
	}
	if (srv.pid < 0 && server_start(sb, err, sizeof err) < 0) {
		reply_error(chan.id, !strcmp(err, "the sandbox has ended") ? "sandbox_gone" : "start_failed", err);
		return;
	}
	/* the frame's header goes in front of the body, in the room left for it */
	char head[48];
	int hl = snprintf(head, sizeof head, "%llu %zu\n", chan.id, srv.body_len);
	srv.req = srv.body + sizeof head - (size_t)hl;
	memcpy(srv.req, head, (size_t)hl);
	srv.req_len = (size_t)hl + srv.body_len;
	srv.req_off = 0;
	srv.req = memmove(srv.body, srv.req, srv.req_len);
	srv.body = NULL;
	srv.busy = 1;
	srv.id = chan.id;
}

static void server_feed(void)
{
	while (srv.req && srv.req_off < srv.req_len) {
		ssize_t n = write(srv.in, srv.req + srv.req_off, srv.req_len - srv.req_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0)
			return server_stop("the file server stopped reading");
		srv.req_off += (size_t)n;
	}
	free(srv.req);
	srv.req = NULL;
}

/* The answer's line is complete: it must be {"id":ID,"ev":"files",...,"len":N} -> its whole length, or 0 */
static size_t answer_length(const char *line, size_t n)
{
	char want[64];
	int wl = snprintf(want, sizeof want, "{\"id\":%llu,\"ev\":\"files\",", srv.id);
	if (n < (size_t)wl + 8 || memcmp(line, want, (size_t)wl) || line[n - 1] != '}')
		return 0;
	size_t i = n - 1;
	while (i > 0 && line[i - 1] >= '0' && line[i - 1] <= '9')
		i--;
	if (i == n - 1 || i < 7 || memcmp(line + i - 7, ",\"len\":", 7))
		return 0;
	unsigned long long len = strtoull(line + i, NULL, 10);
	if (len > FILES_DATA_MAX)
		return 0;
	return n + 1 + (size_t)len;
}

/* recvmsg of the server's stdout: n bytes into buf; a descriptor that came with them into srv.ans_fd (a
 * second one, or one unasked for, ends the server: -2) -> n, 0 at end of file, -1 with errno, -2 */
static ssize_t server_recv(char *buf, size_t cap)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	struct iovec iov = {buf, cap};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	ssize_t n = recvmsg(srv.out, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	int bad = (msg.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (srv.ans_fd < 0 && srv.busy)
				srv.ans_fd = fd;
			else {
				close(fd);
				bad = 1;
			}
		}
	}
	return bad ? -2 : n;
}

static void server_read(void)
{
	char buf[CHUNK];
	for (;;) {
		ssize_t n = server_recv(buf, sizeof buf);
		if (n == -2)
			return server_stop("the file server sent a descriptor it was not asked for");
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0)
			return server_stop("the file server ended");
		if (!srv.busy)
			return server_stop(NULL); /* it speaks unasked: it is not ours to trust */
		glsb_jbuf_put(&srv.ans, buf, (size_t)n);
		if (srv.ans.failed)
			return server_stop("out of memory for the file server's answer");
		if (!srv.ans_total) {
			char *nl = memchr(srv.ans.p, '\n', srv.ans.len);
			if (!nl && srv.ans.len > FILES_HEAD_MAX)
				return server_stop("the file server's answer is not one");
			if (nl && !(srv.ans_total = answer_length(srv.ans.p, (size_t)(nl - srv.ans.p))))
				return server_stop("the file server's answer is not one");
		}
		if (srv.ans_total && srv.ans.len > srv.ans_total)
			return server_stop("the file server said more than one answer");
		if (srv.ans_total && srv.ans.len == srv.ans_total) {
			/* an answer says "fd":true exactly when its descriptor came with it (the server's `open`);
			 * the descriptor goes on to the host with the answer's first byte */
			size_t head = (size_t)((char *)memchr(srv.ans.p, '\n', srv.ans.len) - srv.ans.p);
			int says_fd = memmem(srv.ans.p, head, ",\"fd\":true,", 11) != NULL;
			if (says_fd != (srv.ans_fd >= 0) || (says_fd && srv.relay_fd >= 0))
				return server_stop("the file server's answer and its descriptor do not go together");
			if (says_fd) {
				srv.relay_fd = srv.ans_fd;
				srv.relay_off = chan.reply.len;
				srv.ans_fd = -1;
			}
			glsb_jbuf_put(&chan.reply, srv.ans.p, srv.ans.len);
			glsb_jbuf_free(&srv.ans);
			srv.ans_total = 0;
			srv.busy = 0;
		}
	}
}

/* --- requests ----------------------------------------------------------------------------- */

static int parse_u64(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

static void handle_header(struct sb *sb)
{
	char *w[6];
	int n = 0;
	char *save = NULL;
	chan.header[chan.hlen] = '\0';
	for (char *t = strtok_r(chan.header, " ", &save); t && n < 6; t = strtok_r(NULL, " ", &save))
		w[n++] = t;
	unsigned long long id;
	if (n < 2 || parse_u64(w[1], 1ULL << 53, &id) < 0)
		return protocol_error(sb, "a request is VERB ID ...");
	if (!strcmp(w[0], "call") && n == 5) {
		if (parse_u64(w[2], MAX_ARGS, &chan.nargs) < 0 || parse_u64(w[3], MAX_ARGBYTES, &chan.argbytes) < 0 ||
		    parse_u64(w[4], MAX_STDIN, &chan.stdin_left) < 0)
			return protocol_error(sb, "call ID NARGS ARGBYTES STDINBYTES: a number is missing or too large");
		chan.id = id;
		chan.args = malloc(chan.argbytes + 1);
		if (!chan.args)
			return protocol_error(sb, "out of memory for the arguments");
		chan.args_len = 0;
		chan.refused = chan.pid >= 0;
		if (chan.refused)
			reply_error(id, "busy", "another call is running");
		chan.state = IN_ARGS;
	} else if (!strcmp(w[0], "cancel") && n == 2) {
		if (chan.pid >= 0 && chan.call_id == id && !chan.reaped) {
			kill(chan.pid, SIGTERM);
			chan.kill_at_ms = now_ms() + KILL_AFTER_MS;
		}
	} else if (!strcmp(w[0], "stats") && n == 2) {
		long long cur = -1, peak = -1;
		long oom = sb->have_cgroup ? glsb_sb_cgroup_oom_kills(&sb->cgroup) : -1;
		if (sb->have_cgroup)
			glsb_sb_cgroup_memory(&sb->cgroup, &cur, &peak);
		struct glsb_jbuf line = {0};
		glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"stats\"", id);
		if (oom >= 0)
			glsb_jbuf_printf(&line, ",\"oom_kills\":%ld", oom);
		else
			glsb_jbuf_puts(&line, ",\"oom_kills\":null");
		if (cur >= 0)
			glsb_jbuf_printf(&line, ",\"memory_bytes\":%lld", cur);
		else
			glsb_jbuf_puts(&line, ",\"memory_bytes\":null");
		if (peak >= 0)
			glsb_jbuf_printf(&line, ",\"memory_peak_bytes\":%lld}", peak);
		else
			glsb_jbuf_puts(&line, ",\"memory_peak_bytes\":null}");
		reply_line(&line);
	} else if (!strcmp(w[0], "forward") && n == 3) {
		/* one host port on 127.0.0.1 to a port of the sandbox (sb_usernet.c) */
		unsigned long long port = 0;
		unsigned host = 0;
		char why[400] = "forward ID PORT: PORT must be 1 to 65535";
		int rc = parse_u64(w[2], 65535, &port) < 0 || port == 0
			 ? -1 : glsb_sb_net_forward(sb, (unsigned)port, &host, why, sizeof why);
		if (rc == 0) {
			struct glsb_jbuf line = {0};
			glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"forward\",\"port\":%llu,\"host_port\":%u}", id, port,
					 host);
			reply_line(&line);
		} else {
			reply_error(id, rc > 0 ? "no_network" : "forward_failed",
				    rc > 0 ? "the sandbox has no network (created without --network)" : why);
		}
	} else if (!strcmp(w[0], "files") && n == 3) {
		unsigned long long len;
		if (parse_u64(w[2], FILES_REQ_MAX, &len) < 0)
			return protocol_error(sb, "files ID LEN: LEN is missing or too large");
		chan.id = id;
		/* room in front for the frame the server gets ("ID LEN\n", handle_files) */
		srv.body = malloc(48 + (size_t)len);
		if (!srv.body)
			return protocol_error(sb, "out of memory for a files request");
		srv.body_len = (size_t)len;
		srv.body_need = 0;
		chan.state = IN_FILES;
	} else if (!strcmp(w[0], "ping") && n == 2) {
		struct glsb_jbuf line = {0};
		glsb_jbuf_printf(&line, "{\"id\":%llu,\"ev\":\"pong\"}", id);
		reply_line(&line);
	} else {
		return protocol_error(sb, "unknown request (call, files, cancel, stats, forward, ping)");
	}
}

/* The request's arguments are complete: check and start the call. */
static void handle_args(struct sb *sb)
{
	chan.args[chan.args_len] = '\0';
	size_t k = 0;
	for (size_t i = 0; i < chan.args_len; i++)
		k += chan.args[i] == '\0';
	if (!chan.refused) {
		if (k != chan.nargs || (chan.args_len && chan.args[chan.args_len - 1] != '\0'))
			return protocol_error(sb, "call: ARGBYTES must hold exactly NARGS NUL-terminated arguments");
		start_call(sb);
	}
	free(chan.args);
	chan.args = NULL;
	chan.state = chan.stdin_left ? IN_STDIN : IN_HEADER;
}

/* Read from the host what the current state can take. */
static void read_requests(struct sb *sb)
{
	while (chan.in >= 0 && chan.state != IN_CLOSED && reply_pending() < OUT_HIGH) {
		if (chan.state == IN_STDIN && !chan.refused && chan.fd_in >= 0 && !chan.no_splice &&
		    chan.stage_len == chan.stage_off) {
			/* stdin bytes straight from the socket into the call's pipe: splice(2) moves
			 * them in the kernel, never through our memory. The count is ours (stdin_left):
			 * at most what the header announced is taken from the socket. */
			size_t want = chan.stdin_left < SPLICE_MAX ? (size_t)chan.stdin_left : SPLICE_MAX;
			ssize_t n = splice(chan.in, NULL, chan.fd_in, NULL, want, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n > 0) {
				chan.stdin_left -= (size_t)n;
				if (!chan.stdin_left) {
					close_fd(&chan.fd_in);
					chan.state = IN_HEADER;
				}
				continue;
			}
			if (n == 0)
				return protocol_error(sb, "the channel ended inside a call's stdin");
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				/* the host has sent nothing more, or the pipe is full: wait for the one
				 * that holds us up (polling the socket while the pipe is full would spin) */
				struct pollfd q = {chan.fd_in, POLLOUT, 0};
				chan.wait_pipe = poll(&q, 1, 0) == 0;
				return;
			}
			if (errno == EPIPE) { /* the call stopped reading: drop the rest */
				close_fd(&chan.fd_in);
				continue;
			}
			chan.no_splice = 1; /* no splice between these descriptors: copy through stage */
			continue;
		}
		if (chan.state == IN_STDIN) {
			/* stdin bytes: staged, then into the call's pipe (or dropped) */
			if (chan.stage_len > chan.stage_off)
				return; /* the pipe has not taken the last ones yet */
			size_t want = chan.stdin_left < sizeof chan.stage ? (size_t)chan.stdin_left : sizeof chan.stage;
			ssize_t n = read(chan.in, chan.stage, want);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				return;
			if (n <= 0)
				return protocol_error(sb, "the channel ended inside a call's stdin");
			chan.stdin_left -= (size_t)n;
			chan.stage_len = (size_t)n;
			chan.stage_off = 0;
			if (chan.refused || chan.fd_in < 0)
				chan.stage_len = 0;
			if (!chan.stdin_left && !chan.stage_len)
				close_fd(&chan.fd_in);
			if (!chan.stdin_left)
				chan.state = IN_HEADER;
			return; /* the poll loop feeds the pipe */
		}
		if (chan.state == IN_FILES) {
			if (srv.body_need == srv.body_len) {
				handle_files(sb);
				free(srv.body);
				srv.body = NULL;
				chan.state = IN_HEADER;
				continue;
			}
			ssize_t n = read(chan.in, srv.body + 48 + srv.body_need, srv.body_len - srv.body_need);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				return;
			if (n <= 0)
				return protocol_error(sb, "the channel ended inside a files request");
			srv.body_need += (size_t)n;
			continue;
		}
		if (chan.state == IN_ARGS) {
			if (chan.args_len == chan.argbytes) {
				handle_args(sb);
				continue;
			}
			ssize_t n = read(chan.in, chan.args + chan.args_len, chan.argbytes - chan.args_len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				return;
			if (n <= 0)
				return protocol_error(sb, "the channel ended inside a call's arguments");
			chan.args_len += (size_t)n;
			continue;
		}
		/* IN_HEADER: one byte at a time up to the newline (a header is short, and nothing of
		 * the payload that follows may be consumed here) */
		char ch;
		ssize_t n = read(chan.in, &ch, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n == 0) { /* the host closed its side: no more requests */
			if (chan.in != chan.out)
				close_fd(&chan.in);
			else
				chan.in = -1;
			chan.state = IN_CLOSED;
			return;
		}
		if (n < 0)
			return protocol_error(sb, "reading the channel failed");
		if (ch == '\n') {
			handle_header(sb);
			chan.hlen = 0;
		} else if (chan.hlen >= HEADER_MAX) {
			return protocol_error(sb, "a request header is longer than 256 bytes");
		} else {
			chan.header[chan.hlen++] = ch;
		}
	}
}

/* Give the call the stdin bytes staged. */
static void feed_stdin(void)
{
	while (chan.fd_in >= 0 && chan.stage_len > chan.stage_off) {
		ssize_t n = write(chan.fd_in, chan.stage + chan.stage_off, chan.stage_len - chan.stage_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) { /* the call stopped reading: drop the rest */
			close_fd(&chan.fd_in);
			break;
		}
		chan.stage_off += (size_t)n;
	}
	if (chan.stage_off >= chan.stage_len) {
		chan.stage_len = chan.stage_off = 0;
		if (chan.state != IN_STDIN)
			close_fd(&chan.fd_in); /* all of it was given */
	}
}

/* --- what the supervisor calls ------------------------------------------------------------ */

int glsb_sb_control_open(struct sb *sb, char *err, size_t errcap)
{
	if (sb->opt.control_in < 0)
		return 0;
	chan.in = sb->opt.control_in;
	chan.out = sb->opt.control_out;
	chan.report_fd = sb->opt.report_fd;
	chan.state = IN_HEADER;
	if (fcntl(chan.in, F_SETFL, fcntl(chan.in, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(chan.out, F_SETFL, fcntl(chan.out, F_GETFL) | O_NONBLOCK) < 0) {
		glsb_fmt(err, errcap, "--control-fd: %s", strerror(errno));
		return -1;
	}
	/* Replies (a download's bytes) move in larger steps through a larger send buffer: fewer
	 * wake-ups of the host per MiB. Best effort (capped by net.core.wmem_max; not a socket:
	 * nothing to do). */
	int sndbuf = 4 << 20;
	setsockopt(chan.out, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	return 0;
}

int glsb_sb_control_pollfds(struct sb *sb, struct pollfd *p, int *idx)
{
	int n = 0;
	for (int i = 0; i < SB_CONTROL_FDS; i++)
		idx[i] = -1;
	if (!sb->reported_ok)
		return 0; /* requests wait for the sandbox to be up */
	/* requests only while the host takes the replies: a host that sends and never reads
	 * costs at most OUT_HIGH of our memory */
	int pipe_full = chan.state == IN_STDIN && chan.fd_in >= 0 && chan.wait_pipe;
	if (chan.in >= 0 && chan.state != IN_CLOSED && !(chan.state == IN_STDIN && chan.stage_len > chan.stage_off) &&
	    !pipe_full && reply_pending() < OUT_HIGH)
		p[idx[0] = n++] = (struct pollfd){chan.in, POLLIN, 0};
	if (chan.out >= 0 && (reply_pending() || sf_pending()))
		p[idx[1] = n++] = (struct pollfd){chan.out, POLLOUT, 0};
	if (chan.fd_in >= 0 && (chan.stage_len > chan.stage_off || pipe_full))
		p[idx[2] = n++] = (struct pollfd){chan.fd_in, POLLOUT, 0};
	/* stdout: copied while the host keeps up; spliced one frame at a time, when the last one and
	 * every reply before it are gone (else a readable pipe would wake us without end) */
	int splicing = !chan.no_out_splice && chan.out >= 0;
	if (chan.fd_out >= 0 && (splicing ? !sf_pending() && !reply_pending() : reply_pending() < OUT_HIGH))
		p[idx[3] = n++] = (struct pollfd){chan.fd_out, POLLIN, 0};
	if (chan.fd_err >= 0)
		p[idx[4] = n++] = (struct pollfd){chan.fd_err, POLLIN, 0};
	if (srv.in >= 0 && srv.req)
		p[idx[5] = n++] = (struct pollfd){srv.in, POLLOUT, 0};
	if (srv.out >= 0 && reply_pending() < OUT_HIGH)
		p[idx[6] = n++] = (struct pollfd){srv.out, POLLIN, 0};
	return n;
}

void glsb_sb_control_events(struct sb *sb, const struct pollfd *p, const int *idx)
{
	int pipe_ready = idx[2] >= 0 && p[idx[2]].revents;
	if (pipe_ready) {
		chan.wait_pipe = 0;
		feed_stdin();
	}
	/* Requests before output: relaying refills the replies up to OUT_HIGH, and requests are
	 * read only below it, so a host that reads slower than the helper writes would otherwise
	 * have its cancel wait as long as the output lasts. */
	if ((idx[0] >= 0 && p[idx[0]].revents) || (pipe_ready && chan.state == IN_STDIN))
		read_requests(sb);
	if (idx[3] >= 0 && p[idx[3]].revents)
		relay_stdout();
	if (idx[4] >= 0 && p[idx[4]].revents)
		relay(&chan.fd_err, "stderr");
	if (idx[6] >= 0 && p[idx[6]].revents)
		server_read();
	server_feed();
	feed_stdin();
	finish_call_if_done(sb);
	if (chan.kill_at_ms && chan.pid >= 0 && !chan.reaped && now_ms() >= chan.kill_at_ms) {
		kill(chan.pid, SIGKILL);
		chan.kill_at_ms = 0;
	}
	flush_replies();
}

int glsb_sb_control_timeout_ms(void)
{
	if (!chan.kill_at_ms || chan.pid < 0 || chan.reaped)
		return -1;
	long long left = chan.kill_at_ms - now_ms();
	return left < 0 ? 0 : (int)left;
}

void glsb_sb_control_reap(struct sb *sb)
{
	if (srv.pid > 0 && waitpid(srv.pid, NULL, WNOHANG) == srv.pid) {
		srv.pid = -1; /* reaped: server_stop has no one to kill; what it wrote is read first */
		if (srv.out >= 0)
			server_read();
		server_stop("the file server ended");
		flush_replies();
	}
	if (chan.pid < 0 || chan.reaped)
		return;
	int st;
	if (waitpid(chan.pid, &st, WNOHANG) == chan.pid) {
		chan.status = st;
		chan.reaped = 1;
		/* what it wrote before it ended is in the pipes: take it, then see end of file */
		if (chan.fd_out >= 0)
			relay_stdout();
		if (chan.fd_err >= 0)
			relay(&chan.fd_err, "stderr");
		finish_call_if_done(sb);
		flush_replies();
	}
}

void glsb_sb_control_finish(struct sb *sb)
{
	server_stop("the sandbox has ended");
	free(srv.body);
	srv.body = NULL;
	if (chan.in < 0 && chan.out < 0)
		return;
	/* The sandbox has ended, and the call with it (it was in its pid namespace). */
	if (chan.pid >= 0) {
		if (!chan.reaped) {
			kill(chan.pid, SIGKILL);
			if (waitpid(chan.pid, &chan.status, 0) == chan.pid)
				chan.reaped = 1;
		}
		for (int tries = 0; tries < 100 && (chan.fd_out >= 0 || chan.fd_err >= 0); tries++) {
			if (chan.fd_out >= 0)
				relay_stdout();
			if (chan.fd_err >= 0)
				relay(&chan.fd_err, "stderr");
			if (chan.fd_out >= 0 || chan.fd_err >= 0)
				flush_replies(), nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
		}
		sf_materialize(); /* the pipe closes now: a frame on its way takes its bytes first */
		close_fd(&chan.fd_out);
		close_fd(&chan.fd_err);
		finish_call_if_done(sb);
	}
	/* The host gets what is pending, within a bound: it may have stopped reading. */
	sf_materialize();
	long long until = now_ms() + 2000;
	while (chan.out >= 0 && reply_pending() && now_ms() < until) {
		struct pollfd p = {chan.out, POLLOUT, 0};
		poll(&p, 1, 100);
		flush_replies();
	}
	free(chan.args);
	chan.args = NULL;
	glsb_jbuf_free(&chan.reply);
	if (chan.in >= 0 && chan.in != chan.out)
		close(chan.in);
	chan.in = -1;
	/* One socket for both (--control-fd N = --report-fd N): the exit line is still to come on it, and
	 * glsb_sb_report_exit closes it. */
	if (chan.out >= 0 && chan.out == sb->opt.report_fd)
		chan.out = -1;
	else
		close_fd(&chan.out);
	close_fd(&chan.fd_in);
	close_fd(&srv.relay_fd); /* what did not go with the last replies */
}
