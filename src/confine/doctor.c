/* doctor.c: `glsb-confine doctor`: print one JSON object saying which confinement features this
 * kernel offers to the sandbox, each probed the way `sandbox` uses it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "sbkit.h"
#include "text.h"

static char reasons[2048];

static void reason(const char *feature, const char *why)
{
	struct glsb_jbuf b = {0};
	glsb_jbuf_printf(&b, "%s\"%s\":", reasons[0] ? "," : "", feature);
	glsb_json_cstr(&b, why);
	glsb_jbuf_put(&b, "", 1);
	size_t len = strlen(reasons);
	if (!b.failed)
		glsb_fmt(reasons + len, sizeof reasons - len, "%s", b.p);
	glsb_jbuf_free(&b);
}

/* In a child: no_new_privs, then the sandbox's own seccomp filter. Exit code says how far. */
static int probe_seccomp(int *nnp, int *filter, int *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(1);
		if (glsb_sb_seccomp_install() < 0)
			_exit(errno == ENOSYS ? 3 : 2);
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
	*nnp = code == 0 || code >= 2;
	*filter = code == 0;
	*err = code;
	return 0;
}

int glsb_cmd_doctor(int argc, char **argv)
{
	struct glsb_jbuf b = {0};
	int required_ok = 1;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs("usage: glsb-confine doctor\n\n"
		      "Print one JSON object: each confinement feature (namespaces, Landlock ABI,\n"
		      "seccomp, no_new_privs, openat2, pidfd, cgroup v2 and v1) as true/false/number;\n"
		      "\"cgroup_limits\": what `sandbox` would use (\"v2\", \"v1\" or false; probed by\n"
		      "creating and removing a leaf cgroup), with \"cgroup_cpu\" (a CPU quota can be set)\n"
		      "and \"cgroup_sockets\" (socket buffers are charged); \"reasons\" for the false ones;\n"
		      "and\n"
		      "\"sandbox_ready\": whether `sandbox` can run without --allow-degraded.\n",
		      stdout);
		return 0;
	}
	glsb_jbuf_printf(&b, "{");
	for (int i = 0; i < glsb_sb_namespace_count; i++) {
		const struct glsb_sb_ns *ns = &glsb_sb_namespaces[i];
		int e = glsb_sb_probe_ns(ns->flag);
		glsb_jbuf_printf(&b, "%s\"%s\":%s", i ? "," : "", ns->name, e ? "false" : "true");
		if (e) {
			char why[128];
			glsb_fmt(why, sizeof why, "unshare: %s", strerror(e));
			reason(ns->name, why);
			if (ns->flag != CLONE_NEWCGROUP && ns->flag != CLONE_NEWTIME)
				required_ok = 0;
		}
	}

	int abi = glsb_sb_landlock_abi();
	int ll_errno = errno;
	glsb_jbuf_printf(&b, ",\"landlock_abi\":%d", abi);
	if (abi <= 0) {
		reason("landlock_abi", ll_errno == EOPNOTSUPP ? "Landlock disabled at boot (lsm=)"
				       : ll_errno == ENOSYS ? "kernel built without Landlock"
				       : strerror(ll_errno));
		required_ok = 0;
	}

	int nnp = 0, filter = 0, code = 0;
	if (probe_seccomp(&nnp, &filter, &code) < 0)
		code = -1;
	glsb_jbuf_printf(&b, ",\"seccomp_filter\":%s,\"no_new_privs\":%s", filter ? "true" : "false",
			   nnp ? "true" : "false");
	if (!nnp)
		reason("no_new_privs", "prctl(PR_SET_NO_NEW_PRIVS) failed");
	if (!filter)
		reason("seccomp_filter", code == 3 ? "no filter for this architecture"
					 : "prctl(PR_SET_SECCOMP) failed");
	required_ok &= nnp && filter;

	struct glsb_open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	long fd = glsb_sys_openat2(AT_FDCWD, ".", &how);
	glsb_jbuf_printf(&b, ",\"openat2\":%s", fd >= 0 ? "true" : "false");
	if (fd >= 0)
		close((int)fd);
	else
		reason("openat2", strerror(errno));
	fd = glsb_sys_pidfd_open(getpid(), 0);
	glsb_jbuf_printf(&b, ",\"pidfd\":%s", fd >= 0 ? "true" : "false");
	if (fd >= 0)
		close((int)fd);
	else
		reason("pidfd", strerror(errno));

	glsb_jbuf_printf(&b, ",");
	glsb_sb_cgroup_describe(&b);
	/* What `sandbox` would get: create a leaf exactly as it does, then remove it. */
	struct glsb_sb_cgroup cg;
	char name[64];
	glsb_fmt(name, sizeof name, "sb-%d-doctor", (int)getpid());
	struct glsb_sb_limits lim = {.memory_mb = 64, .pids = 16, .cpu_quota_us = 50000,
				     .cpu_period_us = 100000};
	if (glsb_sb_cgroup_create(&cg, name, &lim) == 0) {
		glsb_jbuf_printf(&b, ",\"cgroup_limits\":\"v%d\",\"cgroup_cpu\":%s,\"cgroup_sockets\":%s",
				   cg.version, cg.cpu ? "true" : "false", cg.sockets ? "true" : "false");
		if (!cg.cpu)
			reason("cgroup_cpu", cg.cpu_why);
		if (!cg.sockets)
			reason("cgroup_sockets", "socket buffers are not charged to the memory cgroup "
					      "(v1 without memory.kmem.tcp.limit_in_bytes)");
		glsb_sb_cgroup_remove(&cg);
	} else {
		glsb_jbuf_printf(&b, ",\"cgroup_limits\":false,\"cgroup_cpu\":false,\"cgroup_sockets\":false");
		reason("cgroup_limits", cg.why);
		reason("cgroup_cpu", cg.why);
		reason("cgroup_sockets", cg.why);
	}
	glsb_jbuf_printf(&b, ",\"sandbox_ready\":%s,\"reasons\":{%s}}\n",
			   required_ok ? "true" : "false", reasons);
	if (b.failed) {
		fputs("glsb-confine doctor: out of memory\n", stderr);
		return 1;
	}
	fwrite(b.p, 1, b.len, stdout);
	glsb_jbuf_free(&b);
	return 0;
}
