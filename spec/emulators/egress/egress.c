/* Egress rules for the emulators' sandboxes (tests only; see spec/emulators/README.md "Egress").
 *
 * The emulators' sandboxes share the machine's network, so a provider's egress policy (E2B's
 * allowOut/denyOut, OpenSandbox's networkPolicy) is enforced where a program reaches the network:
 * this library, preloaded into every process of a sandbox that has rules (LD_PRELOAD), checks each
 * connect(2) and each sendto/sendmsg with a destination. The rules come in GLSB_EMU_EGRESS:
 *
 *   allow=10.0.0.0/8,192.0.2.7/32;deny=0.0.0.0/0;names=example.com,*.pypi.org;denynames=x.org;default=deny
 *
 * A destination in `allow` is reachable; else one in `deny` is not; else `default` decides (allow
 * when absent). A host name in `names` is allowed by the addresses getaddrinfo(3) returns for it in
 * this process (the DNS-learned allow set of OpenSandbox's egress sidecar, pkg/nftables dynamic sets);
 * a name in `denynames`, or with default=deny a name not in `names`, does not resolve (EAI_NONAME, as
 * the sidecar's DNS proxy answers NXDOMAIN). 127.0.0.1, ::1 and unix sockets are the sandbox's own and always reachable;
 * other loopback addresses (127.0.0.2...) stand for the outside, so tests have targets. Refused:
 * ECONNREFUSED. A test double: a static binary, or code that makes its own syscalls, is not checked.
 *
 * The sandbox's own loopback (GLSB_EMU_LOOPBACK=127.a.b.c, one address per sandbox): the sandboxes
 * share the machine's network, where a VM (E2B) or a container (OpenSandbox) has a localhost of its
 * own. So a TCP server of the sandbox that binds the wildcard or 127.0.0.1 (0.0.0.0:P, 127.0.0.1:P, and
 * for IPv6 sockets :: or ::1, as ::ffff:127.a.b.c) is bound to the sandbox's address instead, port P !=
 * 0, and two sandboxes can serve the same port; a TCP connect to 127.0.0.1:P (or ::1, ::ffff:127.0.0.1)
 * goes to the sandbox's address when something listens there on P (/proc/net/tcp, tcp6), else where it
 * was going (the machine's loopback: the emulator's test targets). The emulator itself listens on the
 * sandbox's address for the ports the sandbox's own services have (envd's, the interpreter's), and its
 * proxy forwards a sandbox port there. The address is the sandbox's own: always reachable.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define MAX_RULES 256
#define MAX_LEARNED 1024
#define MAX_NAME 254

struct cidr { uint32_t net, mask; };

static struct cidr allow_rules[MAX_RULES], deny_rules[MAX_RULES];
static int n_allow, n_deny, default_deny, loaded;
static char names[MAX_RULES][MAX_NAME], deny_names[MAX_RULES][MAX_NAME];
static int n_names, n_deny_names;
static uint32_t learned[MAX_LEARNED];
static int n_learned;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int parse_cidr(const char *s, size_t len, struct cidr *out)
{
	char buf[32];
	if (len == 0 || len >= sizeof buf) return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	int bits = 32;
	char *slash = strchr(buf, '/');
	if (slash) {
		*slash = '\0';
		char *end;
		long b = strtol(slash + 1, &end, 10);
		if (*end || b < 0 || b > 32) return -1;
		bits = (int)b;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1) return -1;
	out->mask = bits == 0 ? 0 : htonl(0xffffffffu << (32 - bits));
	out->net = a.s_addr & out->mask;
	return 0;
}

/* Calls fn(item, len) for each comma-separated item of the value of key in the rules string. */
static void each_item(const char *rules, const char *key, void (*fn)(const char *, size_t))
{
	size_t klen = strlen(key);
	for (const char *p = rules; p && *p;) {
		const char *end = strchr(p, ';');
		size_t plen = end ? (size_t)(end - p) : strlen(p);
		if (plen > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
			const char *v = p + klen + 1, *vend = p + plen;
			while (v < vend) {
				const char *c = memchr(v, ',', (size_t)(vend - v));
				size_t ilen = c ? (size_t)(c - v) : (size_t)(vend - v);
				if (ilen > 0) fn(v, ilen);
				v += ilen + 1;
			}
		}
		p = end ? end + 1 : NULL;
	}
}

static void add_allow(const char *s, size_t n) { if (n_allow < MAX_RULES && parse_cidr(s, n, &allow_rules[n_allow]) == 0) n_allow++; }
static void add_deny(const char *s, size_t n) { if (n_deny < MAX_RULES && parse_cidr(s, n, &deny_rules[n_deny]) == 0) n_deny++; }
static void add_to(char (*list)[MAX_NAME], int *count, const char *s, size_t n)
{
	if (*count < MAX_RULES && n < MAX_NAME) {
		memcpy(list[*count], s, n);
		list[*count][n] = '\0';
		(*count)++;
	}
}
static void add_name(const char *s, size_t n) { add_to(names, &n_names, s, n); }
static void add_deny_name(const char *s, size_t n) { add_to(deny_names, &n_deny_names, s, n); }
static void set_default(const char *s, size_t n) { default_deny = n == 4 && strncmp(s, "deny", 4) == 0; }

static void load(void)
{
	if (loaded) return;
	loaded = 1;
	const char *rules = getenv("GLSB_EMU_EGRESS");
	if (!rules) return;
	each_item(rules, "allow", add_allow);
	each_item(rules, "deny", add_deny);
	each_item(rules, "names", add_name);
	each_item(rules, "denynames", add_deny_name);
	each_item(rules, "default", set_default);
}

static int in_list(const struct cidr *list, int n, uint32_t a)
{
	for (int i = 0; i < n; i++)
		if ((a & list[i].mask) == list[i].net) return 1;
	return 0;
}

/* The sandbox's own loopback address (network order), or 0: GLSB_EMU_LOOPBACK, read once. */
static uint32_t own_addr(void)
{
	static int read_it;
	static uint32_t own;
	if (!read_it) {
		struct in_addr a;
		const char *v = getenv("GLSB_EMU_LOOPBACK");
		if (v && inet_pton(AF_INET, v, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127) own = a.s_addr;
		read_it = 1;
	}
	return own;
}

/* 1 when an IPv4 destination (network order) may be reached. */
static int ipv4_allowed(uint32_t a)
{
	if (a == htonl(INADDR_LOOPBACK) || (a && a == own_addr())) return 1;
	if (in_list(allow_rules, n_allow, a)) return 1;
	for (int i = 0; i < n_learned; i++)
		if (learned[i] == a) return 1;
	if (in_list(deny_rules, n_deny, a)) return 0;
	return !default_deny;
}

static int addr_allowed(const struct sockaddr *sa, socklen_t len)
{
	if (!sa || len < (socklen_t)sizeof(sa_family_t)) return 1;
	if (!getenv("GLSB_EMU_EGRESS")) return 1;
	pthread_mutex_lock(&lock);
	load();
	int ok = 1;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		ok = ipv4_allowed(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	} else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			uint32_t a;
			memcpy(&a, &a6->s6_addr[12], 4);
			ok = ipv4_allowed(a);
		} else if (!IN6_IS_ADDR_LOOPBACK(a6)) {
			/* the rules are IPv4: other IPv6 goes only where everything may */
			ok = !default_deny;
			for (int i = 0; i < n_deny; i++)
				if (deny_rules[i].mask == 0) ok = 0;
		}
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static int name_in(char (*list)[MAX_NAME], int count, const char *node)
{
	size_t nl = strlen(node);
	while (nl > 0 && node[nl - 1] == '.') nl--;
	for (int i = 0; i < count; i++) {
		const char *r = list[i];
		if (r[0] == '*' && r[1] == '.') {
			size_t sl = strlen(r + 1); /* ".example.com" */
			if (nl > sl && strncasecmp(node + nl - sl, r + 1, sl) == 0) return 1;
		} else if (strlen(r) == nl && strncasecmp(node, r, nl) == 0) {
			return 1;
		}
	}
	return 0;
}

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static int is_stream(int fd)
{
	int type = 0;
	socklen_t n = sizeof type;
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &n) == 0 && type == SOCK_STREAM;
}

static int v6only(int fd)
{
	int on = 0;
	socklen_t n = sizeof on;
	return getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, &n) == 0 && on;
}

/* Whether a TCP socket listens on the sandbox's address, port (network order): /proc/net/tcp lists
 * it as ADDR:PORT in hex (the address as the kernel holds it, read as a host-order word), tcp6 as the
 * v4-mapped address. State 0A is LISTEN. */
static int listening_on_own(uint16_t port)
{
	char want4[32], want6[64], line[512];
	uint32_t own = own_addr();
	const unsigned char *b = (const unsigned char *)&own;
	snprintf(want4, sizeof want4, "%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], ntohs(port));
	snprintf(want6, sizeof want6, "0000000000000000FFFF0000%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], ntohs(port));
	const char *files[2] = {"/proc/net/tcp", "/proc/net/tcp6"};
	const char *wants[2] = {want4, want6};
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");
		if (!f) continue;
		int found = 0;
		while (!found && fgets(line, sizeof line, f)) {
			char local[80], remote[80], st[8];
			if (sscanf(line, "%*s %79s %79s %7s", local, remote, st) == 3 && strcmp(st, "0A") == 0 &&
			    strcasecmp(local, wants[i]) == 0)
				found = 1;
		}
		fclose(f);
		if (found) return 1;
	}
	return 0;
}

/* The sandbox's own address in place of the wildcard or 127.0.0.1 (bind), or of 127.0.0.1 when it is
 * served there (connect): sa copied to out (room for a sockaddr_in6) and 1, or 0 to use sa as it is. */
static int own_loopback(int fd, const struct sockaddr *sa, socklen_t len, int binding, struct sockaddr_in6 *out)
{
	uint32_t own = own_addr();
	if (!own || !sa || !is_stream(fd)) return 0;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		uint32_t a = in->sin_addr.s_addr;
		if (in->sin_port == 0) return 0;
		if (!(a == htonl(INADDR_LOOPBACK) || (binding && a == htonl(INADDR_ANY)))) return 0;
		if (!binding && !listening_on_own(in->sin_port)) return 0;
		struct sockaddr_in *o = (struct sockaddr_in *)out;
		memcpy(o, in, sizeof *o);
		o->sin_addr.s_addr = own;
		return 1;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const struct in6_addr *a6 = &in6->sin6_addr;
		uint32_t mapped = 0;
		if (IN6_IS_ADDR_V4MAPPED(a6)) memcpy(&mapped, &a6->s6_addr[12], 4);
		int local = IN6_IS_ADDR_LOOPBACK(a6) || mapped == htonl(INADDR_LOOPBACK) ||
			    (binding && (IN6_IS_ADDR_UNSPECIFIED(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && mapped == htonl(INADDR_ANY))));
		if (in6->sin6_port == 0 || !local || v6only(fd)) return 0;
		if (!binding && !listening_on_own(in6->sin6_port)) return 0;
		memcpy(out, in6, sizeof *out);
		memset(&out->sin6_addr, 0, sizeof out->sin6_addr);
		out->sin6_addr.s6_addr[10] = 0xff;
		out->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&out->sin6_addr.s6_addr[12], &own, 4);
		out->sin6_scope_id = 0;
		return 1;
	}
	return 0;
}

int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	static bind_fn real;
	if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
	struct sockaddr_in6 own;
	if (own_loopback(fd, sa, len, 1, &own)) return real(fd, (const struct sockaddr *)&own, len);
	return real(fd, sa, len);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static connect_fn real;
	if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
	if (!addr_allowed(sa, len)) {
		errno = ECONNREFUSED;
		return -1;
	}
	struct sockaddr_in6 own;
	if (own_loopback(fd, sa, len, 0, &own)) return real(fd, (const struct sockaddr *)&own, len);
	return real(fd, sa, len);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa, socklen_t len)
{
	static sendto_fn real;
	if (!real) real = (sendto_fn)dlsym(RTLD_NEXT, "sendto");
	if (sa && !addr_allowed(sa, len)) {
		errno = ECONNREFUSED;
		return -1;
	}
	return real(fd, buf, n, flags, sa, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static sendmsg_fn real;
	if (!real) real = (sendmsg_fn)dlsym(RTLD_NEXT, "sendmsg");
	if (msg && msg->msg_name && !addr_allowed((const struct sockaddr *)msg->msg_name, msg->msg_namelen)) {
		errno = ECONNREFUSED;
		return -1;
	}
	return real(fd, msg, flags);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
	static gai_fn real;
	if (!real) real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	if (!node || !getenv("GLSB_EMU_EGRESS")) return real(node, service, hints, res);
	struct in_addr probe;
	struct in6_addr probe6;
	if (inet_pton(AF_INET, node, &probe) == 1 || inet_pton(AF_INET6, node, &probe6) == 1) return real(node, service, hints, res);
	pthread_mutex_lock(&lock);
	load();
	int listed = name_in(names, n_names, node);
	int refuse = !listed && strcasecmp(node, "localhost") != 0 && (default_deny || name_in(deny_names, n_deny_names, node));
	pthread_mutex_unlock(&lock);
	if (refuse) return EAI_NONAME;
	int rc = real(node, service, hints, res);
	if (rc == 0 && listed) {
		pthread_mutex_lock(&lock);
		for (struct addrinfo *ai = *res; ai; ai = ai->ai_next) {
			if (ai->ai_family == AF_INET && n_learned < MAX_LEARNED)
				learned[n_learned++] = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;
		}
		pthread_mutex_unlock(&lock);
	}
	return rc;
}
