"""crondiff.py — differential test of src/base/cron.c against ref.py around DST transitions.

    make crondiff [CRONDIFF_SEED=N]                      (run by `make test`, seed 1)
    python3 tests/crondiff/crondiff.py [--drv PATH] [SEED]

For each (zone, window) below compares the fires of fixed, hourly and random expressions with
ref.py's brute force over zoneinfo: 17 windows x (10 fixed + 25 random) = 595 expressions, a few
seconds. SEED (default 1) picks the random expressions and window starts, so a run is
reproducible and `make test` always checks the same cases; another seed checks others. The
driver (drv.c) is the Makefile's $(BUILD)/tests/crondiff-drv, built with that build's flags
(a sanitizer build's too); without --drv it is compiled here against build/libhourglass.a.
Prints each mismatch and a summary; exits 1 on any mismatch, and when nothing was compared."""
import argparse
import datetime as dt
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from ref import fires  # noqa: E402

ap = argparse.ArgumentParser(description="cron.c against ref.py around DST transitions")
ap.add_argument("--drv", help="the driver built from drv.c (default: build it into build/)")
ap.add_argument("seed", nargs="?", type=int, default=1)
args = ap.parse_args()
random.seed(args.seed)
DRV = args.drv
if DRV is None:
    DRV = os.path.join(ROOT, "build", "crondiff-drv")
    subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-I" + os.path.join(ROOT, "src"), "-o", DRV,
                    os.path.join(HERE, "drv.c"), os.path.join(ROOT, "build", "libhourglass.a"), "-lm"],
                   check=True)
MON = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DOW = "Sun Mon Tue Wed Thu Fri Sat".split()

# Zones and UTC date windows around their transitions: Berlin and New York 2026, Lord Howe
# (30-minute DST), Sao Paulo 2018/19 (midnight transitions), Apia 2011 (a skipped day), Troll
# (2-hour DST), St John's (-3:30), Dublin (negative DST in the TZif data), Berlin 2045 (the
# footer rule), and zones without DST.
WINDOWS = [
    ("Europe/Berlin", "2026-03-27", "2026-03-31"), ("Europe/Berlin", "2026-10-23", "2026-10-27"),
    ("America/New_York", "2026-03-06", "2026-03-10"), ("America/New_York", "2026-10-30", "2026-11-03"),
    ("Australia/Lord_Howe", "2026-04-03", "2026-04-07"), ("Australia/Lord_Howe", "2026-10-02", "2026-10-06"),
    ("America/Sao_Paulo", "2018-11-02", "2018-11-06"), ("America/Sao_Paulo", "2019-02-15", "2019-02-19"),
    ("Pacific/Apia", "2011-12-27", "2012-01-02"),
    ("Antarctica/Troll", "2026-03-27", "2026-03-31"), ("Antarctica/Troll", "2026-10-23", "2026-10-27"),
    ("America/St_Johns", "2026-03-06", "2026-03-10"),
    ("Europe/Dublin", "2026-03-27", "2026-03-31"), ("Europe/Dublin", "2026-10-23", "2026-10-27"),
    ("Europe/Berlin", "2045-03-24", "2045-03-28"),
    ("Asia/Tokyo", "2026-01-01", "2026-01-05"), ("UTC", "2028-02-26", "2028-03-02"),
]
FIXED = ["30 2 * * *", "0 * * * *", "*/15 * * * *", "0,30 2 * * *", "*/20 2 * * *", "15 1-3 * * *",
         "0 0 * * *", "* 2 * * *", "30 0 * * *", "0 23 * * *"]


def rand_field(lo, hi, names=None):
    """A random field: '*', '*/n', 'a-b[/n]' or a list of values and names."""
    k = random.random()
    if k < 0.3:
        return "*"
    if k < 0.4:
        return "*/%d" % random.randint(1, min(hi - lo + 1, 30))
    if k < 0.55:
        a = random.randint(lo, hi)
        b = random.randint(a, hi)
        return "%d-%d" % (a, b) + ("/%d" % random.randint(1, 5) if random.random() < 0.4 else "")
    vals = sorted(random.sample(range(lo, hi + 1), random.randint(1, 3)))
    return ",".join(names[v - lo] if names and random.random() < 0.3 else str(v) for v in vals)


def rand_expr():
    return " ".join([rand_field(0, 59), rand_field(0, 23),
                     rand_field(1, 31) if random.random() < 0.5 else "*",
                     rand_field(1, 12, MON) if random.random() < 0.3 else "*",
                     rand_field(0, 6, DOW) if random.random() < 0.5 else "*"])


def utc(day):
    return int(dt.datetime.fromisoformat(day + "T00:00:00+00:00").timestamp())


bad = checked = refused = 0
for zone, d0, d1 in WINDOWS:
    a = utc(d0) + random.randint(0, 3600)
    b = utc(d1)
    exprs = FIXED + [rand_expr() for _ in range(25)]
    out = subprocess.run([DRV, zone, str(a), str(b)], input="\n".join(exprs) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(out) == len(exprs), (zone, len(out))
    for e, line in zip(exprs, out):
        if line.startswith("ERR"):  # e.g. "0 0 31 4 *": refused, ref.py has no opinion
            refused += 1
            continue
        checked += 1
        got = [int(x) for x in line.split()]
        want = fires(e, zone, a, b)
        if got != want:
            bad += 1
            print("MISMATCH", zone, a, b, repr(e), "\n got", got[:10], "\nwant", want[:10])
print("crondiff: seed %d: %d expressions checked (%d refused by cron_parse), %d mismatches"
      % (args.seed, checked, refused, bad))
sys.exit(1 if bad or not checked else 0)
