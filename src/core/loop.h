/* loop.h: what http.c needs from the poll step. */
#ifndef GLSB_LOOP_H
#define GLSB_LOOP_H

#include <curl/curl.h>

/* The process-wide multi handle (created on first use; NULL if libcurl cannot make one). */
CURLM *glsb_loop_multi(void);
/* A fresh poll token. */
long long glsb_loop_token(void);
/* Report a token as ready at the end of the current (or next) poll step. */
void glsb_loop_ready(long long token);
/* Called by loop.c for each finished transfer; implemented in http.c. */
void glsb_http_transfer_done(CURL *easy, CURLcode rc);

#endif
