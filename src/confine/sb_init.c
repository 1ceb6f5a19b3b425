/* sb_init.c: PID 1 of the sandbox's pid namespace: starts PROGRAM, reaps every orphan, forwards
 * termination signals to PROGRAM and exits with its status; the kernel then kills whatever is
 * left in the namespace. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb.h"
#include "files.h"

void glsb_sb_run_init(struct sb *sb, const char *prog, char **envp)
{
	sigset_t set, none;
	int code = 0;

	/* As PID 1: reap every orphan, forward termination signals to PROGRAM, and exit with its
	 * status; the kernel then kills whatever is left in the namespace. */
	sigemptyset(&none);
	sigemptyset(&set);
	static const int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
		sigaddset(&set, fwd[i]);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);

	pid_t pid = fork();
	if (pid < 0)
		_exit(EXIT_SETUP);
	if (pid == 0) {
		for (int sig = 1; sig < 65; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (glsb_sys_close_range(3, ~0U, 0) < 0)
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
		execve(prog, sb->opt.argv, envp);
		char msg[512];
		int n = snprintf(msg, sizeof msg, "glsb-confine sandbox: exec %s: %s\n", prog,
				 strerror(errno));
		glsb_write_all(2, msg, (size_t)n);
		_exit(127);
	}
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(pid, sig);
			continue;
		}
		for (;;) {
			int st;
			pid_t w = waitpid(-1, &st, WNOHANG);
			if (w <= 0)
				break;
			if (w == pid) {
				char line[32];
				int n = snprintf(line, sizeof line, "X%d\n", st);
				glsb_write_all(sb->status_wr, line, (size_t)n);
				code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				_exit(code);
			}
		}
	}
}
