#ifndef TIMERD_CCURL_SHIM_H
#define TIMERD_CCURL_SHIM_H

#include <curl/curl.h>

/* curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot call:
 * one typed wrapper per argument kind. */

static inline CURLcode tcurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tcurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tcurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tcurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*tcurl_write_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tcurl_easy_setopt_write(CURL *handle, tcurl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode tcurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tcurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

typedef int (*tcurl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *context, void *socket_context);
typedef int (*tcurl_timer_callback)(CURLM *multi, long timeout_ms, void *context);

static inline CURLMcode tcurl_multi_setopt_socket(CURLM *multi, tcurl_socket_callback callback, void *context) {
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
    return code != CURLM_OK ? code : curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, context);
}

static inline CURLMcode tcurl_multi_setopt_timer(CURLM *multi, tcurl_timer_callback callback, void *context) {
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
    return code != CURLM_OK ? code : curl_multi_setopt(multi, CURLMOPT_TIMERDATA, context);
}

static inline CURLMcode tcurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* The result of a finished transfer (CURLMsg's union). */
static inline CURLcode tcurl_message_result(const CURLMsg *message) {
    return message->data.result;
}

#endif
