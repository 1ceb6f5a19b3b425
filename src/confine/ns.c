/* ns.c: the namespaces a sandbox uses, and a probe telling whether the kernel lets us create one. */
#include <errno.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbkit.h"

const struct glsb_sb_ns glsb_sb_namespaces[] = {
	{"userns", CLONE_NEWUSER},     {"mountns", CLONE_NEWNS},   {"pidns", CLONE_NEWPID},
	{"netns", CLONE_NEWNET},       {"ipcns", CLONE_NEWIPC},    {"utsns", CLONE_NEWUTS},
	{"cgroupns", CLONE_NEWCGROUP}, {"timens", CLONE_NEWTIME},
};
const int glsb_sb_namespace_count = sizeof glsb_sb_namespaces / sizeof glsb_sb_namespaces[0];

int glsb_sb_probe_ns(int flag)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		/* Same order as the sandbox: the user namespace first gives the rights for the rest. */
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(errno & 0xff);
		if (flag != CLONE_NEWUSER && unshare(flag) < 0)
			_exit(errno & 0xff);
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return EFAULT;
}
