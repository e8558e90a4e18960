#ifndef TIMERD_CTIMERDCURL_H
#define TIMERD_CTIMERDCURL_H

/* libcurl for timerd's one HTTP transport (TimerdHTTP: webhooks and the etcd client), loaded with dlopen on first use rather than linked: libcurl
 * pulls in some thirty libraries (TLS, Kerberos, LDAP, SSH, ...) whose loading alone cost a daemon without
 * webhooks about 5 MiB of resident memory. Only the headers are used at build time (Debian's
 * libcurl4-openssl-dev); every call goes through the tcurl_ functions below, never curl_* directly.
 *
 * Also: curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot
 * call, hence one typed wrapper per argument kind. */

#include <stddef.h>
#include <curl/curl.h>

/* Loads `library` (libcurl.so.4), resolves what timerd uses and calls curl_global_init(CURL_GLOBAL_DEFAULT)
 * once; 0 on success, else -1 with the reason in `error`. Call before any other tcurl_ function. Safe to
 * call more than once and from several threads: only the first call loads (the others wait for it), and
 * every call returns the first call's result and reason, whatever `library` it names. */
int tcurl_load(const char *library, char *error, size_t size);


CURLM *tcurl_multi_init(void);
CURLMcode tcurl_multi_add_handle(CURLM *multi, CURL *easy);
CURLMcode tcurl_multi_remove_handle(CURLM *multi, CURL *easy);
const char *tcurl_multi_strerror(CURLMcode code);
CURLMcode tcurl_multi_socket_action(CURLM *multi, curl_socket_t socket, int events, int *running);
CURLMsg *tcurl_multi_info_read(CURLM *multi, int *left);
/* For a stream (the etcd watch), a multi handle of its own driven on its thread: curl_easy_perform would wait up to a
 * second between looks at a progress callback on an idle stream (measured), the watch must notice its
 * stop flag sooner, so it polls with a short timeout instead. */
CURLMcode tcurl_multi_perform(CURLM *multi, int *running);
CURLMcode tcurl_multi_poll(CURLM *multi, int timeout_ms, int *ready);
CURLMcode tcurl_multi_cleanup(CURLM *multi);

typedef int (*tcurl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *context, void *socket_context);
typedef int (*tcurl_timer_callback)(CURLM *multi, long timeout_ms, void *context);
CURLMcode tcurl_multi_setopt_socket(CURLM *multi, tcurl_socket_callback callback, void *context);
CURLMcode tcurl_multi_setopt_timer(CURLM *multi, tcurl_timer_callback callback, void *context);

CURL *tcurl_easy_init(void);
void tcurl_easy_cleanup(CURL *easy);
/* Options back to their defaults; the handle keeps its open connections (reused by the next transfer). */
void tcurl_easy_reset(CURL *easy);
const char *tcurl_easy_strerror(CURLcode code);
CURLcode tcurl_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode tcurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode tcurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value);
CURLcode tcurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value);
typedef size_t (*tcurl_write_callback)(char *data, size_t size, size_t count, void *context);
CURLcode tcurl_easy_setopt_write(CURL *easy, tcurl_write_callback callback);
CURLcode tcurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value);
/* A blocking transfer on the calling thread (HTTPExchange.perform: the etcd client; the webhooks use an HTTPSession). */
CURLcode tcurl_easy_perform(CURL *easy);

struct curl_slist *tcurl_slist_append(struct curl_slist *list, const char *text);
void tcurl_slist_free_all(struct curl_slist *list);

/* The result of a finished transfer (CURLMsg's union). */
CURLcode tcurl_message_result(const CURLMsg *message);

#endif
