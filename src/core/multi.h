/* multi.h: libcurl's multi handle, driven by the loop; each transfer reports its end through a source. */
#ifndef GLSB_MULTI_H
#define GLSB_MULTI_H

#include <curl/curl.h>

#include "loop.h"

/* Starts easy on the shared multi handle (made, and made the loop's driver, on first use). When the
 * transfer ends the loop's step calls src->done(src, CURLcode) with the transfer already removed from
 * the multi handle. Returns 0, or -1 when libcurl cannot start it. */
int glsb_multi_add(CURL *easy, struct glsb_source *src);
/* Stops a transfer that has not ended (one that ended has left the multi handle already: do not call). */
void glsb_multi_remove(CURL *easy);

#endif
