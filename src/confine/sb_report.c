/* sb_report.c: the --report-fd line of `glsb-confine sandbox` (REPORT.md): the features missing,
 * what the child applied ('O' message), its set-up failure ('E' message), and the line the
 * supervisor writes from either. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"

static void list_add(char *list, size_t cap, const char *name)
{
	size_t len = strlen(list);
	glsb_sb_fmt(list + len, cap - len, "%s\"%s\"", len ? "," : "", name);
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
	struct glsb_ws_buf b = {0};
	glsb_ws_buf_puts(&b, "{\"ok\":false,\"error\":");
	glsb_ws_json_cstr(&b, msg);
	glsb_ws_buf_printf(&b, ",\"missing\":[%s]}\n", sb->missing);
	if (!b.failed)
		glsb_sb_write_all(sb->opt.report_fd, b.p, b.len);
	glsb_ws_buf_free(&b);
	close(sb->opt.report_fd);
	sb->opt.report_fd = -1;
}

void glsb_sb_child_fail(struct sb *sb, const char *fmt, ...)
{
	char msg[1024];
	struct glsb_ws_buf b = {0};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	glsb_ws_buf_puts(&b, "E\"error\":");
	glsb_ws_json_cstr(&b, msg);
	glsb_ws_buf_printf(&b, ",\"missing\":[%s]", sb->missing);
	if (!b.failed)
		glsb_sb_write_all(sb->status_wr, b.p, b.len);
	if (sb->opt.report_fd < 0) {
		char line[1100];
		int n = snprintf(line, sizeof line, "glsb-confine sandbox: %s\n", msg);
		glsb_sb_write_all(2, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
	}
	_exit(EXIT_SETUP);
}

void glsb_sb_report_applied(struct sb *sb, const struct sb_applied *a)
{
	const struct glsb_sb_cgroup *cg = &sb->cgroup;
	const struct sb_options *o = &sb->opt;
	struct glsb_ws_buf b = {0};

	glsb_ws_buf_puts(&b, "O\"applied\":{");
	for (int i = 0; i < glsb_sb_namespace_count; i++) {
		const struct glsb_sb_ns *ns = &glsb_sb_namespaces[i];
		int on = ns->flag == CLONE_NEWTIME     ? a->timens
			 : ns->flag == CLONE_NEWCGROUP ? a->cgroupns
						       : !!(sb->clone_flags & ns->flag);
		glsb_ws_buf_printf(&b, "%s\"%s\":%s", i ? "," : "", ns->name, on ? "true" : "false");
	}
	glsb_ws_buf_printf(&b, ",\"no_new_privs\":%s,\"capabilities\":[]", a->nnp ? "true" : "false");
	glsb_ws_buf_printf(&b, ",\"landlock_abi\":%d", a->landlock_abi);
	glsb_ws_buf_printf(&b, ",\"seccomp\":%s", a->seccomp ? "true" : "false");
	if (a->seccomp)
		glsb_ws_buf_printf(&b, ",\"seccomp_rules\":%d", glsb_sb_seccomp_rule_count());
	glsb_ws_buf_printf(&b, ",\"cgroup\":%s",
			   cg->version == 2 ? "\"v2\"" : cg->version == 1 ? "\"v1\"" : "false");
	if (!cg->version) {
		glsb_ws_buf_puts(&b, ",\"cgroup_reason\":");
		glsb_ws_json_cstr(&b, cg->why);
	} else {
		glsb_ws_buf_puts(&b, ",\"cgroup_dirs\":[");
		for (int i = 0; i < cg->ndirs; i++) {
			glsb_ws_buf_puts(&b, i ? "," : "");
			glsb_ws_json_cstr(&b, cg->dirs[i]);
		}
		glsb_ws_buf_puts(&b, "]");
	}
	glsb_ws_buf_printf(&b,
			   ",\"rlimits\":{\"cpu_seconds\":%ld,\"data_mb\":%ld,\"fsize_mb\":%ld,"
			   "\"nofile\":%ld,\"nproc\":%ld},\"tmp_mb\":%ld,\"network\":\"%s\"",
			   o->cpu_s, o->memory_mb, a->fsize_mb, o->nofile, o->nproc, o->disk_mb,
			   o->network ? "host" : "loopback");
	glsb_ws_buf_printf(&b, ",\"uid\":%d,\"host_uid\":%ld,\"host_gid\":%ld}", SANDBOX_UID,
			   sb->host_uid, sb->host_gid);
	glsb_ws_buf_printf(&b, ",\"missing\":[%s],\"optional_missing\":[%s]", sb->missing,
			   sb->opt_missing);
	if (b.failed)
		glsb_sb_child_fail(sb, "report: out of memory");
	glsb_sb_write_all(sb->status_wr, b.p, b.len);
	glsb_ws_buf_free(&b);
}

int glsb_sb_read_status(int fd, struct glsb_ws_buf *msg)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof chunk);
	if (n < 0 && errno == EINTR)
		return 0;
	/* The child's message is a few KiB; more would be a bug, not something to keep. */
	if (n > 0 && msg->len < 65536) {
		glsb_ws_buf_put(msg, chunk, (size_t)n);
		return 0;
	}
	return n > 0 ? 0 : 1;
}

void glsb_sb_forward_status(struct sb *sb, const struct glsb_ws_buf *msg, pid_t pid)
{
	struct glsb_ws_buf line = {0};

	if (msg->len == 0 || sb->opt.report_fd < 0)
		return;
	if (msg->p[0] == 'O')
		glsb_ws_buf_printf(&line, "{\"ok\":true,\"pid\":%d,", (int)pid);
	else
		glsb_ws_buf_puts(&line, "{\"ok\":false,");
	glsb_ws_buf_put(&line, msg->p + 1, msg->len - 1);
	glsb_ws_buf_puts(&line, "}\n");
	if (!line.failed)
		glsb_sb_write_all(sb->opt.report_fd, line.p, line.len);
	glsb_ws_buf_free(&line);
	close(sb->opt.report_fd);
	sb->opt.report_fd = -1;
}
