"""Run the given integration test modules in this one process (one shared stack for all of
them), verbosely, printing how long each module took: `runmods: <module> took <s> s`.
Used by parallel.py; exits non-zero when a test failed."""

from __future__ import annotations

import sys
import time
import unittest


def main() -> int:
    loader = unittest.TestLoader()
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    ok = True
    total = 0
    t0 = time.monotonic()
    for name in sys.argv[1:]:
        started = time.monotonic()
        result = runner.run(loader.loadTestsFromName(name))
        total += result.testsRun
        ok = ok and result.wasSuccessful()
        print(f"runmods: {name} took {time.monotonic() - started:.1f} s", flush=True)
    print(f"runmods: {total} tests in {time.monotonic() - t0:.0f} s, {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
