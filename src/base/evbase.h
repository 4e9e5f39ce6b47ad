/* evbase.h — a libevent loop (event_base) made with the flags its thread needs, in one call:
 * the keeper's and the delivery thread's loops want precise timers (a job's due millisecond),
 * the HTTP workers' epoll's changelist (the net change of each loop iteration only). */
#ifndef HG_EVBASE_H
#define HG_EVBASE_H

#include <event2/event.h>

/* A new event_base with `flags` (enum event_base_config_flag, or'd); NULL when libevent could
 * not make one. Free it with event_base_free. */
struct event_base *evbase_new(int flags);

#endif
