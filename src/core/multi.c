/* multi.c: the loop's transfer driver: one curl multi handle; a finished transfer calls its own source. */
#include <stddef.h>

#include "multi.h"

/* The driver hands the loop's pollfd array to curl_multi_poll as curl_waitfd: same layout, same bits. */
_Static_assert(sizeof(struct pollfd) == sizeof(struct curl_waitfd), "pollfd and curl_waitfd differ");
_Static_assert(offsetof(struct pollfd, events) == offsetof(struct curl_waitfd, events), "events moved");
_Static_assert(offsetof(struct pollfd, revents) == offsetof(struct curl_waitfd, revents), "revents moved");
_Static_assert(POLLIN == CURL_WAIT_POLLIN && POLLOUT == CURL_WAIT_POLLOUT && POLLPRI == CURL_WAIT_POLLPRI,
	       "poll bits differ");

/* One multi handle per process: glsb is single-threaded and every Lua state shares the connection cache. */
static CURLM *multi;

static void multi_step(void)
{
	CURLMsg *msg;
	int running, left;

	curl_multi_perform(multi, &running);
	while ((msg = curl_multi_info_read(multi, &left))) {
		struct glsb_source *src = NULL;
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *easy = msg->easy_handle;
		CURLcode rc = msg->data.result;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&src);
		curl_multi_remove_handle(multi, easy); /* msg is invalid from here on */
		if (src)
			src->done(src, (int)rc);
	}
}

static int multi_wait(struct pollfd *fds, unsigned n, int ms, const char **err)
{
	CURLMcode mc = curl_multi_poll(multi, (struct curl_waitfd *)(void *)fds, n, ms, NULL);

	if (mc != CURLM_OK && mc != CURLM_UNRECOVERABLE_POLL) {
		*err = curl_multi_strerror(mc);
		return -1;
	}
	return 0;
}

static const struct glsb_loop_driver driver = {multi_step, multi_wait};

int glsb_multi_add(CURL *easy, struct glsb_source *src)
{
	if (!multi) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(multi = curl_multi_init()))
			return -1;
		glsb_loop_set_driver(&driver);
	}
	curl_easy_setopt(easy, CURLOPT_PRIVATE, (char *)src);
	return curl_multi_add_handle(multi, easy) == CURLM_OK ? 0 : -1;
}

void glsb_multi_remove(CURL *easy)
{
	if (multi)
		curl_multi_remove_handle(multi, easy);
}
