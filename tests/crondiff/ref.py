"""ref.py — brute-force reference for cron fire times, independent of src/base/cron.c.

Wildcard expressions (minute or hour field starting with '*') fire at every instant whose
wall time matches: walk UTC minutes. Fixed expressions fire once per matching wall time:
walk wall minutes; a repeated time fires at its first occurrence (fold=0), a time in a gap
at the transition that ends the gap (found by bisection). See src/base/cron.h. Assumes the
zone's offsets in the window are whole minutes (true of every zone since 1972 or so)."""
import datetime as dt
import zoneinfo

MON = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DOW = "SUN MON TUE WED THU FRI SAT".split()


def field(text, lo, star_hi, names=None):
    """The set of values of one field (values already in range: drv/cron.c validates)."""
    out = set()

    def value(x):
        return lo + names.index(x.upper()) if names and x.upper() in names else int(x)

    for item in text.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            a, b = lo, star_hi
        elif "-" in base:
            x, y = base.split("-")
            a, b = value(x), value(y)
        else:
            a = b = value(base)
        out |= set(range(a, b + 1, int(step) if step else 1))
    return out


def parse(expr):
    f = expr.split()
    return {
        "minute": field(f[0], 0, 59), "hour": field(f[1], 0, 23), "dom": field(f[2], 1, 31),
        "month": field(f[3], 1, 12, MON), "dow": {d % 7 for d in field(f[4], 0, 6, DOW)},
        "dom_star": f[2][0] == "*", "dow_star": f[4][0] == "*",
        "wildcard": f[0][0] == "*" or f[1][0] == "*",
    }


def match(c, w):
    """Does naive wall time w match? Vixie: with neither day field starting with '*', either."""
    if w.minute not in c["minute"] or w.hour not in c["hour"] or w.month not in c["month"]:
        return False
    dom_ok = w.day in c["dom"]
    dow_ok = w.isoweekday() % 7 in c["dow"]
    return (dom_ok and dow_ok) if (c["dom_star"] or c["dow_star"]) else (dom_ok or dow_ok)


def offset_at(t, z):
    return dt.datetime.fromtimestamp(t, z).utcoffset()


def fires(expr, zone, start, end):
    """Fire times (unix s) of expr in zone within (start, end]."""
    z = zoneinfo.ZoneInfo(zone)
    c = parse(expr)
    out = set()
    if c["wildcard"]:
        t = start - start % 60 - 7200
        while t <= end:
            w = dt.datetime.fromtimestamp(t, z).replace(tzinfo=None)
            if w.second == 0 and match(c, w):
                out.add(t)
            t += 60
    else:
        w = dt.datetime.fromtimestamp(start, z).replace(tzinfo=None, second=0) - dt.timedelta(hours=3)
        w_end = dt.datetime.fromtimestamp(end, z).replace(tzinfo=None) + dt.timedelta(hours=3)
        while w <= w_end:
            if match(c, w):
                t0 = int(w.replace(tzinfo=z, fold=0).timestamp())
                t1 = int(w.replace(tzinfo=z, fold=1).timestamp())
                if dt.datetime.fromtimestamp(t0, z).replace(tzinfo=None) == w:
                    out.add(min(t0, t1))  # exists; if repeated, the first occurrence
                else:  # in a gap: the transition between the two readings ends it
                    lo, hi = min(t0, t1), max(t0, t1)
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        if offset_at(mid, z) == offset_at(lo, z):
                            lo = mid
                        else:
                            hi = mid
                    out.add(hi)
            w += dt.timedelta(minutes=1)
    return sorted(t for t in out if start < t <= end)
