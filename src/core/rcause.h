/* rcause.h — why Redis did not do what was asked: the causes an error reply (or its absence)
 * is sorted into, their names for metrics labels and JSON, and the classifier. Pure
 * functions of text, below both the connection (rconn.c) and the metrics (metrics.c). */
#ifndef HG_RCAUSE_H
#define HG_RCAUSE_H

#include <stddef.h>

/* Why Redis did not do what was asked. */
enum rcause {
    RCAUSE_NONE,
    RCAUSE_DOWN,     /* not connected: refused, lost, or dropped by us */
    RCAUSE_TIMEOUT,  /* no reply within timeout_ms (a hung or paused Redis) */
    RCAUSE_OOM,      /* maxmemory reached: writes refused */
    RCAUSE_BUSY,     /* a script or function runs past busy-reply-threshold */
    RCAUSE_READONLY, /* the server is a replica (after a failover) */
    RCAUSE_LOADING,  /* the server is loading its dataset */
    RCAUSE_NOSCRIPT, /* the script cache lacks a script even after reloading */
    RCAUSE_SCRIPT,   /* a Lua script raised an error */
    RCAUSE_AUTH,     /* NOAUTH, WRONGPASS, NOPERM */
    RCAUSE_OTHER,
    RCAUSE_COUNT
};

/* Stable lower-case name of a cause ("oom", "readonly"...), for metrics labels and JSON. */
const char *rcause_name(enum rcause cause);

/* Classify the text of an error reply (exposed for tests). */
enum rcause rcause_classify(const char *err, size_t len);

/* 1 when the cause is Redis answering but refusing work as a whole (OOM, BUSY, READONLY,
 * LOADING, NOSCRIPT, AUTH): /health should say unavailable while it lasts. Script and "other"
 * errors concern one command only; down and timeout are what rconn_is_up already reports. */
int rcause_refuses(enum rcause cause);

#endif
