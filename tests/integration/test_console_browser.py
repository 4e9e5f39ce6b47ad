"""The operator's console in a real browser: Debian's headless chromium, driven by
playwright-core (tests/browser/console.test.mjs, Node's built-in test runner), against a
daemon on private Redis + MariaDB with an admin token set. Besides what each view does, it
checks WCAG 2.1 AA: an axe-core audit of every view and state (zero violations), Tab through
every view (each stop named, with a visible focus ring), the dialog's focus, the live
regions, reflow at 320 px and reduced motion.

    make integration T=test_console_browser

Installs the browser tests' npm packages from their lockfile first (`npm ci`, once per
lockfile). Screenshots of every view are left in <build dir>/artefacts/console/ (the path is
printed). node, npm and chromium come from scripts/deps.sh (the `test` set)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import unittest
from pathlib import Path

import harness
from harness import REPO_ROOT, HourglassTestCase

BROWSER_DIR = REPO_ROOT / "tests" / "browser"
CHROMIUM = "/usr/bin/chromium"
ADMIN_TOKEN = "console-test-admin-token"
RUN_TIMEOUT = 300


def missing_tools() -> list[str]:
    return [t for t in ("node", "npm", CHROMIUM) if shutil.which(t) is None]


def npm_ci() -> None:
    """`npm ci` in tests/browser unless node_modules already holds what the lockfile says
    (npm writes node_modules/.package-lock.json as it installs)."""
    lock = BROWSER_DIR / "package-lock.json"
    done = BROWSER_DIR / "node_modules" / ".package-lock.json"
    if done.exists() and done.stat().st_mtime >= lock.stat().st_mtime:
        return
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=BROWSER_DIR,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"npm ci in {BROWSER_DIR} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def artefacts_dir() -> Path:
    """<build dir>/artefacts/console: next to the binary under test."""
    return Path(harness.daemon_binary()).resolve().parent / "artefacts" / "console"


class ConsoleBrowserTest(HourglassTestCase):
    def test_console_in_chromium(self):
        missing = missing_tools()
        self.assertEqual(missing, [], "the browser tests need node, npm and chromium: run "
                                      "`sh scripts/deps.sh test` (as root)")
        npm_ci()
        d = self.start_daemon({"http": {"admin_token": ADMIN_TOKEN}})
        harness.wait_healthy(self, d)
        out = artefacts_dir()
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.png"):
            old.unlink()
        print(f"\nconsole screenshots: {out}", file=sys.stderr)
        env = {**os.environ, "HG_URL": d.url, "HG_ADMIN_TOKEN": ADMIN_TOKEN, "HG_ARTEFACTS": str(out),
               "HG_CHROMIUM": CHROMIUM, "NODE_NO_WARNINGS": "1"}
        # its own session, so chromium goes with node if the run has to be cut
        proc = subprocess.Popen(["node", "console.test.mjs"], cwd=BROWSER_DIR, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            self.fail(f"the browser tests did not finish within {RUN_TIMEOUT} s:\n{output}")
        self.assertEqual(proc.returncode, 0, f"browser tests failed (daemon log: {d.log_path}):\n{output[-8000:]}")
        print(output, file=sys.stderr)
        self.assertTrue(list(out.glob("*.png")), f"no screenshots in {out}")


if __name__ == "__main__":
    unittest.main()
