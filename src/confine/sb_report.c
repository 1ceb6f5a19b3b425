/* sb_report.c: the --report-fd line of `glsb-confine sandbox` (REPORT.md): the features missing,
 * what the child applied ('O' message), its set-up failure ('E' message), and the line the
 * supervisor writes from either. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb.h"
#include "files.h"
#include "text.h"

static void list_add(char *list, size_t cap, const char *name)
{
	size_t len = strlen(list);
	glsb_fmt(list + len, cap - len, "%s\"%s\"", len ? "," : "", name);
}

void glsb_sb_add_missing(struct sb *sb, const char *name, int required)
{
	if (required)
		list_add(sb->missing, sizeof sb->missing, name);
	else
		list_add(sb->opt_missing, sizeof sb->opt_missing, name);
}

void glsb_sb_report_failure(struct sb *sb, const char *msg)
{
	if (sb->opt.report_fd < 0) {
		fprintf(stderr, "glsb-confine sandbox: %s\n", msg);
		return;
	}
	struct glsb_jbuf b = {0};
	glsb_jbuf_puts(&b, "{\"ok\":false,\"error\":");
	glsb_json_cstr(&b, msg);
	glsb_jbuf_printf(&b, ",\"missing\":[%s]}\n", sb->missing);
	if (!b.failed)
		glsb_write_all(sb->opt.report_fd, b.p, b.len);
	glsb_jbuf_free(&b);
	close(sb->opt.report_fd);
	sb->opt.report_fd = -1;
}

void glsb_sb_child_fail(struct sb *sb, const char *fmt, ...)
{
	char msg[1024];
	struct glsb_jbuf b = {0};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	glsb_jbuf_puts(&b, "E\"error\":");
	glsb_json_cstr(&b, msg);
	glsb_jbuf_printf(&b, ",\"missing\":[%s]\n", sb->missing);
	if (!b.failed)
		glsb_write_all(sb->status_wr, b.p, b.len);
	if (sb->opt.report_fd < 0) {
		char line[1100];
		int n = snprintf(line, sizeof line, "glsb-confine sandbox: %s\n", msg);
		glsb_write_all(2, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
	}
	_exit(EXIT_SETUP);
}

void glsb_sb_report_applied(struct sb *sb, const struct sb_applied *a)
{
	const struct glsb_sb_cgroup *cg = &sb->cgroup;
	const struct sb_options *o = &sb->opt;
	struct glsb_jbuf b = {0};

	glsb_jbuf_puts(&b, "O\"applied\":{");
	for (int i = 0; i < glsb_sb_namespace_count; i++) {
		const struct glsb_sb_ns *ns = &glsb_sb_namespaces[i];
		int on = ns->flag == CLONE_NEWTIME     ? a->timens
			 : ns->flag == CLONE_NEWCGROUP ? a->cgroupns
						       : !!(sb->clone_flags & ns->flag);
		glsb_jbuf_printf(&b, "%s\"%s\":%s", i ? "," : "", ns->name, on ? "true" : "false");
	}
	glsb_jbuf_printf(&b, ",\"no_new_privs\":%s,\"capabilities\":[]", a->nnp ? "true" : "false");
	glsb_jbuf_printf(&b, ",\"landlock_abi\":%d", a->landlock_abi);
	glsb_jbuf_printf(&b, ",\"seccomp\":%s", a->seccomp ? "true" : "false");
	if (a->seccomp)
		glsb_jbuf_printf(&b, ",\"seccomp_rules\":%d", glsb_sb_seccomp_rule_count());
	glsb_jbuf_printf(&b, ",\"cgroup\":%s",
			   cg->version == 2 ? "\"v2\"" : cg->version == 1 ? "\"v1\"" : "false");
	if (!cg->version) {
		glsb_jbuf_puts(&b, ",\"cgroup_reason\":");
		glsb_json_cstr(&b, cg->why);
	} else {
		glsb_jbuf_puts(&b, ",\"cgroup_dirs\":[");
		for (int i = 0; i < cg->ndirs; i++) {
			glsb_jbuf_puts(&b, i ? "," : "");
			glsb_json_cstr(&b, cg->dirs[i]);
		}
		glsb_jbuf_puts(&b, "]");
	}
	glsb_jbuf_printf(&b,
			   ",\"rlimits\":{\"cpu_seconds\":%ld,\"data_mb\":%ld,\"fsize_mb\":%ld,"
			   "\"nofile\":%ld,\"nproc\":%ld},\"tmp_mb\":%ld,\"network\":\"%s\"",
			   o->cpu_s, o->memory_mb, a->fsize_mb, o->nofile, o->nproc, o->disk_mb,
			   o->network ? "slirp4netns" : "loopback");
	if (o->private_storage)
		glsb_jbuf_printf(&b, ",\"storage\":{\"type\":\"private\",\"mb\":%ld,\"inodes\":%ld}",
				   o->disk_mb, o->max_inodes);
	else
		glsb_jbuf_printf(&b, ",\"storage\":{\"type\":\"workspace\",\"tmp_mb\":%ld}", o->disk_mb);
	glsb_jbuf_puts(&b, ",\"cgroup_cpus\":");
	if (cg->cpu)
		glsb_jbuf_printf(&b, "%g", o->cpus);
	else
		glsb_jbuf_puts(&b, "false");
	glsb_jbuf_printf(&b, ",\"cgroup_sockets\":%s", cg->sockets ? "true" : "false");
	glsb_jbuf_printf(&b, ",\"uid\":%d,\"host_uid\":%ld,\"host_gid\":%ld", SANDBOX_UID,
			   sb->host_uid, sb->host_gid);
	if (sb->id_slot >= 0)
		glsb_jbuf_printf(&b, ",\"id_slot\":%ld}", sb->id_slot);
	else
		glsb_jbuf_puts(&b, ",\"id_slot\":null}");
	glsb_jbuf_printf(&b, ",\"missing\":[%s],\"optional_missing\":[%s]\n", sb->missing,
			   sb->opt_missing);
	if (b.failed)
		glsb_sb_child_fail(sb, "report: out of memory");
	glsb_write_all(sb->status_wr, b.p, b.len);
	glsb_jbuf_free(&b);
}

int glsb_sb_read_status(int fd, struct glsb_jbuf *msg)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof chunk);
	if (n < 0 && errno == EINTR)
		return 0;
	/* The child's messages are a few KiB; more would be a bug, not something to keep. */
	if (n > 0 && msg->len < 65536) {
		glsb_jbuf_put(msg, chunk, (size_t)n);
		return 0;
	}
	return n > 0 ? 0 : 1;
}

int glsb_sb_take_status(struct glsb_jbuf *msg, char *line, size_t cap)
{
	char *nl = msg->len ? memchr(msg->p, '\n', msg->len) : NULL;
	if (!nl)
		return 0;
	size_t n = (size_t)(nl - msg->p);
	glsb_fmt(line, cap, "%.*s", (int)n, msg->p);
	memmove(msg->p, nl + 1, msg->len - n - 1);
	msg->len -= n + 1;
	return 1;
}

void glsb_sb_forward_status(struct sb *sb, const char *msg, pid_t pid)
{
	struct glsb_jbuf line = {0};

	if (!msg[0] || sb->opt.report_fd < 0)
		return;
	if (msg[0] == 'O')
		glsb_jbuf_printf(&line, "{\"ok\":true,\"pid\":%d,\"control\":[\"call\",\"files\"],", (int)pid);
	else
		glsb_jbuf_puts(&line, "{\"ok\":false,");
	glsb_jbuf_puts(&line, msg + 1);
	glsb_jbuf_puts(&line, "}\n");
	if (!line.failed)
		glsb_write_all(sb->opt.report_fd, line.p, line.len);
	glsb_jbuf_free(&line);
	if (msg[0] == 'O') {
		sb->reported_ok = 1;
		return;
	}
	close(sb->opt.report_fd);
	sb->opt.report_fd = -1;
}

void glsb_sb_report_exit(struct sb *sb, int status)
{
	/* init passed on PROGRAM's own wait status (it exits 128+signal itself) */
	if (sb->program_status >= 0)
		status = sb->program_status;
	struct glsb_jbuf b = {0};
	long kills = sb->have_cgroup ? glsb_sb_cgroup_oom_kills(&sb->cgroup) : -1;
	int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;

	if (sb->opt.report_fd < 0)
		return;
	glsb_jbuf_puts(&b, "{\"exit\":{\"code\":");
	if (WIFEXITED(status))
		glsb_jbuf_printf(&b, "%d", WEXITSTATUS(status));
	else
		glsb_jbuf_puts(&b, "null");
	glsb_jbuf_puts(&b, ",\"signal\":");
	if (WIFSIGNALED(status))
		glsb_jbuf_printf(&b, "%d", WTERMSIG(status));
	else
		glsb_jbuf_puts(&b, "null");
	glsb_jbuf_puts(&b, ",\"oom_kills\":");
	if (kills >= 0 && sb->oom_kills_at_start >= 0)
		glsb_jbuf_printf(&b, "%ld", kills - sb->oom_kills_at_start);
	else
		glsb_jbuf_puts(&b, "null");
	/* PROGRAM itself died of SIGKILL while the kernel's OOM killer was at work in the leaf */
	glsb_jbuf_printf(&b, ",\"oom_killed\":%s}}\n",
			   killed && kills > sb->oom_kills_at_start && sb->oom_kills_at_start >= 0
			   ? "true" : "false");
	if (!b.failed)
		glsb_write_all(sb->opt.report_fd, b.p, b.len);
	glsb_jbuf_free(&b);
	close(sb->opt.report_fd);
	sb->opt.report_fd = -1;
}
