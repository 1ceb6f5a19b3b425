/* sb_net.c: the sandbox's host name and loopback: its own uts namespace says "sandbox"; its own
 * net namespace has a loopback, brought up here (and with --network a tap0: sb_usernet.c). */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sb.h"

static void loopback_up(struct sb *sb)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		glsb_sb_child_fail(sb, "socket: %s", strerror(errno));
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(s, SIOCSIFFLAGS, &ifr) < 0))
		glsb_sb_child_fail(sb, "bring up loopback: %s", strerror(errno));
	close(s);
}

void glsb_sb_setup_uts_net(struct sb *sb)
{
	if (sethostname("sandbox", 7) < 0 && (sb->clone_flags & CLONE_NEWUTS))
		glsb_sb_child_fail(sb, "sethostname: %s", strerror(errno));
	if (sb->clone_flags & CLONE_NEWNET)
		loopback_up(sb);
}
