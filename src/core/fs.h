/* fs.h: the file helpers of fs.c that C code (and the C tests) call directly. */
#ifndef GLSB_FS_H
#define GLSB_FS_H

#include <limits.h>
#include <stddef.h>

/*
 * Removes path and everything under it without following any symlink (path itself
 * included: a symlink is removed, not its target) and without entering another mount.
 * A missing path is success. Returns 0, or -1 with a message naming the path in err and, when code
 * is not NULL, the failure's code in *code (an errno name, or TREE_CHANGED; see codes.h).
 */
int glsb_rmtree(const char *path, char *err, size_t errlen, const char **code);

/* The absolute path of the file holding the core (core.so, or the executable it is linked into);
 * 1, or 0 when it cannot be found. */
int glsb_core_file(char out[PATH_MAX]);

#endif
