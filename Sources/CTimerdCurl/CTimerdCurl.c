#include "CTimerdCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* The libcurl functions timerd calls, resolved by tcurl_load. */
static struct {
    CURLcode (*global_init)(long);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    const char *(*multi_strerror)(CURLMcode);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} api;

/* The first tcurl_load's outcome, under `load_lock`. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_state; /* 0: not tried; 1: loaded; -1: failed, with `load_error` */
static char load_error[512];

static int load(const char *name, char *error, size_t size);

int tcurl_load(const char *name, char *error, size_t size) {
    pthread_mutex_lock(&load_lock);
    if (load_state == 0) {
        load_state = load(name, load_error, sizeof load_error) == 0 ? 1 : -1;
        /* Not thread-safe in libcurl before 7.84, hence here, under the lock, once. */
        if (load_state == 1 && api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            snprintf(load_error, sizeof load_error, "curl_global_init failed");
            load_state = -1;
        }
    }
    int result = load_state == 1 ? 0 : -1;
    if (result != 0 && size > 0) snprintf(error, size, "%s", load_error);
    pthread_mutex_unlock(&load_lock);
    return result;
}

static int load(const char *name, char *error, size_t size) {
    /* RTLD_LOCAL: its symbols stay out of the way of everything else in the process. */
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(error, size, "cannot load libcurl (install Debian's libcurl4): %s", dlerror());
        return -1;
    }
#define RESOLVE(field, symbol)                                                                   \
    do {                                                                                       \
        *(void **)&api.field = dlsym(library, symbol);                                           \
        if (api.field == NULL) {                                                               \
            snprintf(error, size, "%s has no %s (libcurl 7.85 or later needed)", name, symbol); \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(multi_init, "curl_multi_init");
    RESOLVE(multi_add_handle, "curl_multi_add_handle");
    RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
    RESOLVE(multi_strerror, "curl_multi_strerror");
    RESOLVE(multi_socket_action, "curl_multi_socket_action");
    RESOLVE(multi_info_read, "curl_multi_info_read");
    RESOLVE(multi_setopt, "curl_multi_setopt");
    RESOLVE(multi_perform, "curl_multi_perform");
    RESOLVE(multi_poll, "curl_multi_poll");
    RESOLVE(multi_cleanup, "curl_multi_cleanup");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_reset, "curl_easy_reset");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(easy_perform, "curl_easy_perform");
    RESOLVE(slist_append, "curl_slist_append");
    RESOLVE(slist_free_all, "curl_slist_free_all");
#undef RESOLVE
    return 0;
}


CURLM *tcurl_multi_init(void) { return api.multi_init(); }
CURLMcode tcurl_multi_add_handle(CURLM *multi, CURL *easy) { return api.multi_add_handle(multi, easy); }
CURLMcode tcurl_multi_remove_handle(CURLM *multi, CURL *easy) { return api.multi_remove_handle(multi, easy); }
const char *tcurl_multi_strerror(CURLMcode code) { return api.multi_strerror(code); }
CURLMcode tcurl_multi_socket_action(CURLM *multi, curl_socket_t socket, int events, int *running) {
    return api.multi_socket_action(multi, socket, events, running);
}
CURLMsg *tcurl_multi_info_read(CURLM *multi, int *left) { return api.multi_info_read(multi, left); }
CURLMcode tcurl_multi_perform(CURLM *multi, int *running) { return api.multi_perform(multi, running); }
CURLMcode tcurl_multi_poll(CURLM *multi, int timeout_ms, int *ready) { return api.multi_poll(multi, NULL, 0, timeout_ms, ready); }
CURLMcode tcurl_multi_cleanup(CURLM *multi) { return api.multi_cleanup(multi); }

CURLMcode tcurl_multi_setopt_socket(CURLM *multi, tcurl_socket_callback callback, void *context) {
    CURLMcode code = api.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
    return code != CURLM_OK ? code : api.multi_setopt(multi, CURLMOPT_SOCKETDATA, context);
}

CURLMcode tcurl_multi_setopt_timer(CURLM *multi, tcurl_timer_callback callback, void *context) {
    CURLMcode code = api.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
    return code != CURLM_OK ? code : api.multi_setopt(multi, CURLMOPT_TIMERDATA, context);
}

CURL *tcurl_easy_init(void) { return api.easy_init(); }
void tcurl_easy_cleanup(CURL *easy) { api.easy_cleanup(easy); }
void tcurl_easy_reset(CURL *easy) { api.easy_reset(easy); }
const char *tcurl_easy_strerror(CURLcode code) { return api.easy_strerror(code); }

CURLcode tcurl_easy_setopt_long(CURL *easy, CURLoption option, long value) { return api.easy_setopt(easy, option, value); }
CURLcode tcurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return api.easy_setopt(easy, option, value);
}
CURLcode tcurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) { return api.easy_setopt(easy, option, value); }
CURLcode tcurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return api.easy_setopt(easy, option, value);
}
CURLcode tcurl_easy_setopt_write(CURL *easy, tcurl_write_callback callback) {
    return api.easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}
CURLcode tcurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) { return api.easy_getinfo(easy, info, value); }
CURLcode tcurl_easy_perform(CURL *easy) { return api.easy_perform(easy); }

struct curl_slist *tcurl_slist_append(struct curl_slist *list, const char *text) { return api.slist_append(list, text); }
void tcurl_slist_free_all(struct curl_slist *list) { api.slist_free_all(list); }

CURLcode tcurl_message_result(const CURLMsg *message) { return message->data.result; }
