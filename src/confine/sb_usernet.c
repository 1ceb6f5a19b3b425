/* sb_usernet.c: --network: the outside, from a net namespace of the sandbox's own. slirp4netns
 * (Debian's; what rootless Podman and Docker use) gives that namespace a tap0 whose connections it
 * makes again with sockets of its own on the host, so the sandbox reaches what the host reaches and
 * shares no interface, address or port with it. It never reaches the host itself: slirp4netns's
 * --disable-host-loopback refuses the host's loopback (10.0.2.2 and 127.0.0.1 on the host), and
 * nftables rules in the namespace, loaded by the sandbox's init before PROGRAM starts (PROGRAM has
 * no capability to change them), refuse the host's other addresses, link-local 169.254.0.0/16 (cloud
 * metadata) and IPv6, unless --net-allow names them; then --net-deny. Names in --net-allow are
 * resolved here, once: their addresses are allowed and pinned in the sandbox's /etc/hosts.
 * A forward (sb:get_host) asks slirp4netns's API for one host port on 127.0.0.1 to that port of
 * tap0's address, where a rule sends new connections on to 127.0.0.1: a server bound to the
 * sandbox's loopback is reached as well as one bound to 0.0.0.0. slirp4netns dies with the
 * supervisor (PR_SET_PDEATHSIG, and --exit-fd: the other end is ours) and is killed and reaped when
 * the sandbox ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb.h"
#include "files.h"
#include "proc.h"
#include "text.h"

#define TAP "tap0"
#define GUEST_ADDR "10.0.2.100" /* tap0's address (slirp4netns --configure) */
#define HOST_ALIAS "10.0.2.2"   /* slirp4netns's name for the host's loopback: refused */
#define READY_MS 10000          /* slirp4netns's start, tap0 configured */
#define API_MS 2000             /* one API request */
#define ADDRS_PER_NAME 16
#define SEARCH_PATH "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

/* "a.b.c.d" or "a.b.c.d/n" -> "a.b.c.d/n" with the host bits cleared. 0 or -1. */
static int parse_cidr(const char *s, char *out, size_t cap)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	long bits = 32;

	if (n == 0 || n >= sizeof addr)
		return -1;
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (slash) {
		char *end;
		if (slash[1] < '0' || slash[1] > '9' || (slash[1] == '0' && slash[2]))
			return -1;
		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (errno || *end || bits > 32)
			return -1;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, addr, &a) != 1)
		return -1;
	uint32_t mask = bits ? 0xffffffffu << (32 - bits) : 0;
	a.s_addr = htonl(ntohl(a.s_addr) & mask);
	if (!inet_ntop(AF_INET, &a, addr, sizeof addr))
		return -1;
	glsb_fmt(out, cap, "%s/%ld", addr, bits);
	return 0;
}

/* A host name: letters, digits, '-' and '.', at most 253 bytes. */
static int is_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '.'))
			return 0;
	return 1;
}

static void add_element(struct glsb_jbuf *set, const char *cidr)
{
	glsb_jbuf_printf(set, "%s%s", set->len ? ", " : "", cidr);
}

/* An nftables interval set of IPv4 prefixes. */
static void put_set(struct glsb_jbuf *rules, const char *name, const struct glsb_jbuf *elements)
{
	glsb_jbuf_printf(rules, "\tset %s { type ipv4_addr; flags interval; auto-merge;", name);
	if (elements->len)
		glsb_jbuf_printf(rules, " elements = { %.*s }", (int)elements->len, elements->p);
	glsb_jbuf_puts(rules, " }\n");
}

/* The host's own IPv4 addresses (not 127/8, which is the sandbox's own loopback inside). */
static void host_addresses(struct glsb_jbuf *never)
{
	struct ifaddrs *ifa, *i;
	char txt[INET_ADDRSTRLEN + 4];

	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		struct in_addr a = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
		if ((ntohl(a.s_addr) >> 24) == 127 || !inet_ntop(AF_INET, &a, txt, INET_ADDRSTRLEN))
			continue;
		strcat(txt, "/32");
		add_element(never, txt);
	}
	freeifaddrs(ifa);
}

static int find(const char *name, char *out, size_t cap, char *err, size_t errcap)
{
	char path[4096];
	const char *p = getenv("PATH");
	glsb_fmt(path, sizeof path, "%s%s%s", p && *p ? p : "", p && *p ? ":" : "", SEARCH_PATH);
	if (glsb_find_program(AT_FDCWD, name, path, out, cap) == 0 && out[0] == '/')
		return 0;
	glsb_fmt(err, errcap, "--network needs %s, found in no directory of PATH or %s "
		 "(Debian: apt-get install slirp4netns nftables)", name, SEARCH_PATH);
	return -1;
}

int glsb_sb_net_prepare(struct sb *sb, char *err, size_t errcap)
{
	struct sb_usernet *n = &sb->net;
	struct glsb_jbuf allow = {0}, deny = {0}, never = {0}, hosts = {0}, rules = {0};
	char c[64];
	int rc = -1;

	n->pid = -1;
	n->exit_fd = -1;
	if (!sb->opt.network) {
		if (sb->opt.nnet_allow || sb->opt.nnet_deny) {
			glsb_fmt(err, errcap, "--net-allow and --net-deny need --network");
			return -1;
		}
		return 0;
	}
	if (find("slirp4netns", n->slirp, sizeof n->slirp, err, errcap) < 0 ||
	    find("nft", n->nft, sizeof n->nft, err, errcap) < 0)
		return -1;
	if ((size_t)glsb_fmt(n->api, sizeof n->api, "%s/slirp4netns.sock", sb->ws_real) >= sizeof n->api) {
		glsb_fmt(err, errcap, "--network: the workspace path is too long for slirp4netns's socket (%s)",
			 sb->ws_real);
		return -1;
	}
	for (int i = 0; i < sb->opt.nnet_allow; i++) {
		const char *a = sb->opt.net_allow[i];
		if (parse_cidr(a, c, sizeof c) == 0) {
			add_element(&allow, c);
			continue;
		}
		if (!is_name(a)) {
			glsb_fmt(err, errcap, "--net-allow %s: not an IPv4 address, CIDR or host name", a);
			goto out;
		}
		struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res, *r;
		int e = getaddrinfo(a, NULL, &hints, &res);
		if (e) {
			glsb_fmt(err, errcap, "--net-allow %s: cannot resolve it: %s", a, gai_strerror(e));
			goto out;
		}
		int k = 0;
		for (r = res; r && k < ADDRS_PER_NAME; r = r->ai_next, k++) {
			char txt[INET_ADDRSTRLEN];
			if (!inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)r->ai_addr)->sin_addr, txt, sizeof txt))
				continue;
			glsb_fmt(c, sizeof c, "%s/32", txt);
			add_element(&allow, c);
			glsb_jbuf_printf(&hosts, "%s\t%s\n", txt, a);
		}
		freeaddrinfo(res);
	}
	for (int i = 0; i < sb->opt.nnet_deny; i++) {
		if (parse_cidr(sb->opt.net_deny[i], c, sizeof c) < 0) {
			glsb_fmt(err, errcap, "--net-deny %s: not an IPv4 address or CIDR", sb->opt.net_deny[i]);
			goto out;
		}
		add_element(&deny, c);
	}
	add_element(&never, HOST_ALIAS "/32");
	add_element(&never, "169.254.0.0/16");
	host_addresses(&never);

	/* Output of the namespace: its loopback, replies (forwarded connections, allowed ones), then
	 * allow, what is never reached, deny. reject: the sandbox's connect fails at once. */
	glsb_jbuf_puts(&rules, "table inet glsb {\n");
	put_set(&rules, "allow", &allow);
	put_set(&rules, "never", &never);
	put_set(&rules, "deny", &deny);
	glsb_jbuf_puts(&rules,
		       "\tchain output {\n"
		       "\t\ttype filter hook output priority filter; policy accept;\n"
		       "\t\toifname \"lo\" accept\n"
		       "\t\tct state established,related accept\n"
		       "\t\tmeta nfproto ipv6 reject\n"
		       "\t\tip daddr @allow accept\n"
		       "\t\tip daddr @never reject\n"
		       "\t\tip daddr @deny reject\n"
		       "\t}\n"
		       "}\n"
		       "table ip glsb_forward {\n"
		       "\tchain prerouting {\n"
		       "\t\ttype nat hook prerouting priority dstnat; policy accept;\n"
		       "\t\tiifname \"" TAP "\" meta l4proto tcp ct state new dnat to 127.0.0.1\n"
		       "\t}\n"
		       "}\n");
	glsb_jbuf_put(&rules, "", 1);
	glsb_jbuf_put(&hosts, "", 1);
	if (rules.failed || hosts.failed || allow.failed || deny.failed || never.failed) {
		glsb_fmt(err, errcap, "--network: out of memory");
		goto out;
	}
	n->rules = rules.p;
	n->hosts = hosts.p;
	rules.p = hosts.p = NULL;
	rc = 0;
out:
	glsb_jbuf_free(&allow);
	glsb_jbuf_free(&deny);
	glsb_jbuf_free(&never);
	glsb_jbuf_free(&hosts);
	glsb_jbuf_free(&rules);
	return rc;
}

/* The first bytes of slirp4netns's log, for a message. */
static void log_excerpt(const struct sb *sb, char *out, size_t cap)
{
	char p[PATH_MAX + 32];
	glsb_fmt(p, sizeof p, "%s/slirp4netns.log", sb->ws_real);
	if (glsb_read_file(p, out, cap) < 0)
		out[0] = '\0';
	for (char *q = out; *q; q++)
		if (*q == '\n')
			*q = ' ';
}

int glsb_sb_net_start(struct sb *sb, pid_t pid, char *err, size_t errcap)
{
	struct sb_usernet *n = &sb->net;
	int ready[2] = {-1, -1}, ex[2] = {-1, -1}, logfd = -1, devnull = -1, rc = -1;
	char logp[PATH_MAX + 32], userns[64], target[32], api_arg[160];
	pid_t me = getpid();

	if (!sb->opt.network)
		return 0;
	glsb_fmt(logp, sizeof logp, "%s/slirp4netns.log", sb->ws_real);
	glsb_fmt(userns, sizeof userns, "--userns-path=/proc/%d/ns/user", (int)pid);
	glsb_fmt(target, sizeof target, "%d", (int)pid);
	glsb_fmt(api_arg, sizeof api_arg, "--api-socket=%s", n->api);
	unlink(n->api);
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0 ||
	    (logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		glsb_fmt(err, errcap, "--network: %s", strerror(errno));
		goto out;
	}
	n->pid = fork();
	if (n->pid < 0) {
		glsb_fmt(err, errcap, "--network: fork: %s", strerror(errno));
		goto out;
	}
	if (n->pid == 0) {
		sigset_t none;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(127);
		if (dup2(devnull, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 || dup2(ready[1], 3) < 0 ||
		    dup2(ex[0], 4) < 0)
			_exit(127);
		if (glsb_sys_close_range(5, ~0U, 0) < 0)
			for (int fd = 5; fd < 1024; fd++)
				close(fd);
		for (int sig = 1; sig < 65; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		char *argv[] = {"slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
				"--enable-sandbox", "--enable-seccomp", api_arg, "--ready-fd=3", "--exit-fd=4",
				userns, target, TAP, NULL};
		char *envp[] = {"PATH=" SEARCH_PATH, NULL};
		execve(n->slirp, argv, envp);
		_exit(127);
	}
	close(ready[1]);
	close(ex[0]);
	ready[1] = ex[0] = -1;
	n->exit_fd = ex[1];
	ex[1] = -1;
	struct pollfd p = {ready[0], POLLIN, 0};
	char one = 0;
	int got = poll(&p, 1, READY_MS);
	if (got == 1 && read(ready[0], &one, 1) == 1 && one == '1') {
		rc = 0;
	} else {
		char why[300];
		log_excerpt(sb, why, sizeof why);
		glsb_fmt(err, errcap, "--network: slirp4netns %s%s%s", got == 0 ? "was not ready in time" : "did not start",
			 why[0] ? ": " : "", why);
	}
out:
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	if (logfd >= 0)
		close(logfd);
	if (devnull >= 0)
		close(devnull);
	return rc;
}

void glsb_sb_net_apply(struct sb *sb)
{
	struct sb_usernet *n = &sb->net;
	int in[2], out[2];
	char msg[512];
	size_t len = 0;

	if (!sb->opt.network)
		return;
	/* Forwarded connections arrive on tap0 and go on to 127.0.0.1: the kernel routes to 127/8
	 * from another interface only with route_localnet. "all" is this namespace's own, and covers
	 * tap0, which slirp4netns may not have made yet. */
	if (glsb_write_knob("/proc/sys/net/ipv4/conf/all/route_localnet", "1") < 0)
		glsb_sb_child_fail(sb, "network: route_localnet: %s", strerror(errno));
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		glsb_sb_child_fail(sb, "network: pipe: %s", strerror(errno));
	pid_t c = fork();
	if (c < 0)
		glsb_sb_child_fail(sb, "network: fork: %s", strerror(errno));
	if (c == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0)
			_exit(127);
		char *argv[] = {"nft", "-f", "-", NULL};
		char *envp[] = {"PATH=" SEARCH_PATH, NULL};
		execve(n->nft, argv, envp);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	int wrote = glsb_write_all(in[1], n->rules, strlen(n->rules));
	close(in[1]);
	for (;;) {
		char buf[256];
		ssize_t r = read(out[0], buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t keep = (size_t)r < sizeof msg - 1 - len ? (size_t)r : sizeof msg - 1 - len;
		memcpy(msg + len, buf, keep);
		len += keep;
	}
	close(out[0]);
	msg[len] = '\0';
	for (char *q = msg; *q; q++)
		if (*q == '\n' || *q == '\t')
			*q = ' ';
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (wrote < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		glsb_sb_child_fail(sb, "network: the nftables rules (%s) did not load: %s", n->nft,
				   msg[0] ? msg : "no message");
}

/* A port on 127.0.0.1 free now (slirp4netns binds it next; taken meanwhile, the request fails and
 * another is tried). 0 when none. */
static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	unsigned port = 0;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return 0;
	if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* One request to slirp4netns's API (a JSON object per connection, answered by one). 0 with the
 * answer in reply, or -1 with err set. */
static int api_call(const char *path, const char *req, char *reply, size_t cap, char *err, size_t errcap)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len = 0;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	glsb_fmt(a.sun_path, sizeof a.sun_path, "%s", path);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0 ||
	    glsb_write_all(s, req, strlen(req)) < 0) {
		glsb_fmt(err, errcap, "slirp4netns's API (%s): %s", path, strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	shutdown(s, SHUT_WR);
	while (len < cap - 1) {
		struct pollfd p = {s, POLLIN, 0};
		if (poll(&p, 1, API_MS) != 1)
			break;
		ssize_t r = read(s, reply + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(s);
	reply[len] = '\0';
	if (len == 0) {
		glsb_fmt(err, errcap, "slirp4netns's API (%s) did not answer", path);
		return -1;
	}
	return 0;
}

int glsb_sb_net_forward(struct sb *sb, unsigned guest_port, unsigned *host_port, char *err, size_t errcap)
{
	struct sb_usernet *n = &sb->net;
	char req[320], reply[1024];

	if (!sb->opt.network || n->pid <= 0)
		return 1;
	if (guest_port == 0 || guest_port > 65535) {
		glsb_fmt(err, errcap, "port %u is not a TCP port (1 to 65535)", guest_port);
		return -1;
	}
	for (int i = 0; i < n->nfwd; i++)
		if (n->fwd[i].guest == guest_port) {
			*host_port = n->fwd[i].host;
			return 0;
		}
	if (n->nfwd >= SB_FORWARDS_MAX) {
		glsb_fmt(err, errcap, "at most %d ports are forwarded per sandbox", SB_FORWARDS_MAX);
		return -1;
	}
	glsb_fmt(err, errcap, "no free port on 127.0.0.1");
	for (int tries = 0; tries < 8; tries++) {
		unsigned h = free_port();
		if (!h)
			continue;
		glsb_fmt(req, sizeof req,
			 "{\"execute\":\"add_hostfwd\",\"arguments\":{\"proto\":\"tcp\",\"host_addr\":\"127.0.0.1\","
			 "\"host_port\":%u,\"guest_addr\":\"" GUEST_ADDR "\",\"guest_port\":%u}}",
			 h, guest_port);
		if (api_call(n->api, req, reply, sizeof reply, err, errcap) < 0)
			return -1;
		if (strstr(reply, "\"return\"") && !strstr(reply, "\"error\"")) {
			n->fwd[n->nfwd].guest = guest_port;
			n->fwd[n->nfwd].host = h;
			n->nfwd++;
			*host_port = h;
			return 0;
		}
		glsb_fmt(err, errcap, "slirp4netns refused the forward: %.300s", reply);
	}
	return -1;
}

void glsb_sb_net_kill(struct sb *sb)
{
	struct sb_usernet *n = &sb->net;

	if (n->exit_fd >= 0)
		close(n->exit_fd);
	n->exit_fd = -1;
	if (n->pid > 0)
		kill(n->pid, SIGKILL);
}

void glsb_sb_net_stop(struct sb *sb)
{
	struct sb_usernet *n = &sb->net;
	char p[PATH_MAX + 32];

	glsb_sb_net_kill(sb);
	if (n->pid > 0)
		while (waitpid(n->pid, NULL, 0) < 0 && errno == EINTR)
			;
	n->pid = -1;
	if (sb->opt.network && sb->ws_real[0]) {
		unlink(n->api);
		glsb_fmt(p, sizeof p, "%s/slirp4netns.log", sb->ws_real);
		unlink(p);
	}
	free(n->rules);
	free(n->hosts);
	n->rules = n->hosts = NULL;
}
