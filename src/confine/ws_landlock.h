/* ws_landlock.h: the Landlock domain `write` installs right before it mutates. */
#ifndef GLSB_WS_LANDLOCK_H
#define GLSB_WS_LANDLOCK_H

#include <stddef.h>

/* The best Landlock ABI the kernel offers, or 0 when Landlock is missing or
 * disabled (errno says why). */
int glsb_ws_landlock_abi(void);

/* Confine this process (and anything it would exec): filesystem access is
 * denied everywhere except, beneath rootfd, what a write needs (make dirs and
 * regular files, write, truncate, remove/rename files, read directories, refer);
 * TCP bind/connect are denied (ABI >= 4), signals and abstract unix sockets
 * are scoped (ABI >= 6). Requires abi >= 3 (REFER and TRUNCATE handled).
 * Returns 0, or -1 with a reason in why. */
int glsb_ws_landlock_confine_writes(int rootfd, int abi, char *why, size_t whylen);

#endif
