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
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
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

/* 1 when an IPv4 destination (network order) may be reached. */
static int ipv4_allowed(uint32_t a)
{
	if (a == htonl(INADDR_LOOPBACK)) return 1;
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

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static connect_fn real;
	if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
	if (!addr_allowed(sa, len)) {
		errno = ECONNREFUSED;
		return -1;
	}
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
