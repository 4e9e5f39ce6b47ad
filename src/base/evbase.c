/* evbase.c — see evbase.h. */
#include "base/evbase.h"

struct event_base *evbase_new(int flags)
{
    struct event_config *ec = event_config_new();
    if (ec == NULL)
        return NULL;
    struct event_base *base = event_config_set_flag(ec, flags) == 0 ? event_base_new_with_config(ec) : NULL;
    event_config_free(ec);
    return base;
}
