/* clock.c — see clock.h. */
#include "base/clock.h"

_Atomic int64_t clock_fleet_offset_us;
static atomic_int fleet_known;

void clock_fleet_set(int64_t offset_us)
{
    atomic_store(&clock_fleet_offset_us, offset_us);
    atomic_store(&fleet_known, 1);
}

int clock_fleet_known(void)
{
    return atomic_load(&fleet_known);
}
