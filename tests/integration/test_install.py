"""Installing (shared/contract.md "Installing"): `make install` / `make uninstall` into a DESTDIR,
and `make deb`'s package installed, checked and removed on this machine.

    make integration T=test_install

* MakeInstallTest: the layout under DESTDIR with the default PREFIX and another; a config
  already there is kept; the unit's paths are the install's; uninstall takes back every file
  install put and keeps an edited config.
* DebPackageTest: the .deb's name, control fields and contents (dpkg-deb), then `dpkg -i` on
  this machine (the tests run as root): the hourglass user, the config readable by it alone,
  `hourglassd -t -c /etc/hourglass/hourglass.conf` passes (as root and as hourglass),
  `systemd-analyze verify` accepts the unit, a reinstall keeps an edited config; `dpkg -r`
  leaves the config (policy) and nothing else; `dpkg -P` leaves nothing, user included.
  It refuses (fails, never skips) when a hourglass package, user or /usr/bin/hourglassd is
  already on the machine — they are someone else's — and purges what it installed even when
  an assertion fails.
"""
from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

ROOT = str(harness.REPO_ROOT)
DOCS = ["README.md", "api.md", "operations.md", "architecture.md", "performance.md"]
USER = "hourglass"


def run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def make(*args: str) -> subprocess.CompletedProcess:
    """make in the repo with the build the suite runs (HOURGLASSD's directory)."""
    build = os.path.dirname(harness.daemon_binary())
    return run(["make", "-C", ROOT, "--no-print-directory", f"BUILD={build}", *args])


def files_under(top: str) -> set[str]:
    out = set()
    for d, _, fs in os.walk(top):
        out |= {os.path.relpath(os.path.join(d, f), top) for f in fs}
    return out


def ini(path: str) -> dict[tuple[str, str], str]:
    section, out = "", {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif "=" in line and not line.startswith(("#", ";")):
                k, v = line.split("=", 1)
                out[(section, k.strip())] = v.strip()
    return out


class MakeInstallTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dest = tempfile.mkdtemp(prefix="hg-install-")
        self.addCleanup(shutil.rmtree, self.dest, True)

    def layout(self, prefix: str) -> set[str]:
        p = prefix.lstrip("/")
        return {"etc/hourglass/hourglass.conf", f"{p}/bin/hourglassd", f"{p}/lib/systemd/system/hourglass.service",
                f"{p}/share/hourglass/schema.sql", f"{p}/share/hourglass/hourglass.conf",
                f"{p}/share/hourglass/nginx.conf", f"{p}/share/man/man8/hourglassd.8"} | \
            {f"{p}/share/doc/hourglass/{d}" for d in DOCS}

    def test_default_prefix_layout_unit_and_config(self):
        make("install", f"DESTDIR={self.dest}")
        d = self.dest
        self.assertEqual(files_under(d), self.layout("/usr/local"))
        binary = f"{d}/usr/local/bin/hourglassd"
        with open(binary, "rb") as a, open(harness.daemon_binary(), "rb") as b:
            self.assertEqual(a.read(), b.read(), "the installed daemon is not the built one")
        self.assertEqual(os.stat(binary).st_mode & 0o777, 0o755)
        self.assertEqual(os.stat(f"{d}/etc/hourglass").st_mode & 0o777, 0o750)
        self.assertEqual(os.stat(f"{d}/etc/hourglass/hourglass.conf").st_mode & 0o777, 0o640)
        with open(f"{ROOT}/sql/schema.sql", encoding="utf-8") as a, \
                open(f"{d}/usr/local/share/hourglass/schema.sql", encoding="utf-8") as b:
            self.assertEqual(a.read(), b.read())

        # the config is the system's, not make run's dev stack, and valid
        conf = f"{d}/etc/hourglass/hourglass.conf"
        out = run([binary, "-t", "-c", conf]).stdout
        self.assertIn("configuration OK", out)
        values = ini(conf)
        self.assertEqual(values[("redis", "address")], "127.0.0.1:6379")
        self.assertEqual(values[("mysql", "port")], "3306")
        self.assertEqual(values[("mysql", "password")], "")
        self.assertEqual(values[("instance", "state_dir")], "/var/lib/hourglass")

        # the unit names the installed paths only
        with open(f"{d}/usr/local/lib/systemd/system/hourglass.service", encoding="utf-8") as f:
            unit = f.read()
        self.assertNotIn("example.invalid", unit)
        keys = [line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#")]
        docs = [v for k, v in keys if k == "Documentation"]
        self.assertIn("man:hourglassd(8)", docs)
        for url in (u for u in docs if u.startswith("file://")):
            self.assertTrue(os.path.isfile(d + url[len("file://"):]), f"Documentation={url} is not installed")
        self.assertGreaterEqual(len([u for u in docs if u.startswith("file://")]), 1)
        for k, v in keys:
            if k in ("ExecStart", "ExecStartPre"):
                argv = v.split()
                self.assertEqual(argv[0], "/usr/local/bin/hourglassd", unit)
                self.assertEqual(argv[argv.index("-c") + 1], "/etc/hourglass/hourglass.conf")

    def test_prefix_is_honoured(self):
        make("install", f"DESTDIR={self.dest}", "PREFIX=/opt/hg")
        self.assertEqual(files_under(self.dest), self.layout("/opt/hg"))
        with open(f"{self.dest}/opt/hg/lib/systemd/system/hourglass.service", encoding="utf-8") as f:
            unit = f.read()
        self.assertIn("ExecStart=/opt/hg/bin/hourglassd -c /etc/hourglass/hourglass.conf", unit)
        self.assertIn("Documentation=file:///opt/hg/share/doc/hourglass/operations.md", unit)
        settings = "\n".join(line for line in unit.splitlines() if not line.startswith("#"))
        self.assertNotIn("/usr/local", settings)

    def test_a_present_config_is_not_overwritten(self):
        conf = f"{self.dest}/etc/hourglass/hourglass.conf"
        os.makedirs(os.path.dirname(conf))
        with open(conf, "w", encoding="utf-8") as f:
            f.write("[http]\nlisten = 127.0.0.1:9999\n")
        out = make("install", f"DESTDIR={self.dest}").stdout
        with open(conf, encoding="utf-8") as f:
            self.assertEqual(f.read(), "[http]\nlisten = 127.0.0.1:9999\n")
        self.assertIn("kept", out)
        # the shipped defaults are there to compare with
        self.assertTrue(os.path.isfile(f"{self.dest}/usr/local/share/hourglass/hourglass.conf"))

    def test_uninstall_removes_what_install_put(self):
        make("install", f"DESTDIR={self.dest}")
        installed = files_under(self.dest)
        make("uninstall", f"DESTDIR={self.dest}")
        self.assertEqual(files_under(self.dest), set(), "uninstall left files")
        left = [os.path.relpath(os.path.join(dp, x), self.dest) for dp, ds, _ in os.walk(self.dest) for x in ds]
        self.assertEqual([p for p in left if "hourglass" in p], [], "uninstall left hourglass's directories")
        self.assertTrue(installed)

        # an edited config is the operator's: kept, and said so; everything else goes
        make("install", f"DESTDIR={self.dest}")
        conf = f"{self.dest}/etc/hourglass/hourglass.conf"
        with open(conf, "a", encoding="utf-8") as f:
            f.write("# edited\n")
        out = make("uninstall", f"DESTDIR={self.dest}").stdout
        self.assertEqual(files_under(self.dest), {"etc/hourglass/hourglass.conf"})
        self.assertIn("kept", out)


def dpkg_status(pkg: str = "hourglass") -> str:
    """dpkg's status of the package ('' when dpkg knows nothing of it)."""
    p = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return p.stdout.strip() if p.returncode == 0 else ""


def dpkg(*args: str) -> subprocess.CompletedProcess:
    """dpkg, waiting (up to 60 s) for the lock another apt or dpkg on the machine may hold."""
    deadline = time.monotonic() + 60
    while True:
        p = run(["dpkg", "--force-confold", *args], check=False)
        if p.returncode == 0 or "lock" not in p.stderr or time.monotonic() > deadline:
            break
        time.sleep(1)
    if p.returncode != 0:
        raise AssertionError(f"dpkg {' '.join(args)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def user_exists(name: str = USER) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def group_exists(name: str = USER) -> bool:
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


class DebPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.version = run([harness.daemon_binary(), "-v"]).stdout.split()[1]
        cls.arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        out = make("deb").stdout
        cls.deb = os.path.join(os.path.dirname(harness.daemon_binary()), f"hourglass_{cls.version}_{cls.arch}.deb")
        if not os.path.isfile(cls.deb):
            raise AssertionError(f"make deb did not build {cls.deb}:\n{out}")

    def field(self, name: str) -> str:
        return run(["dpkg-deb", "-f", self.deb, name]).stdout.strip()

    def test_1_control_and_contents(self):
        self.assertEqual(self.field("Package"), "hourglass")
        self.assertEqual(self.field("Version"), self.version)
        self.assertEqual(self.field("Architecture"), self.arch)
        self.assertTrue(self.field("Maintainer"))
        depends = [d.strip().split()[0] for d in self.field("Depends").split(",")]
        for lib in ("libc6", "libevent-2.1-7", "libevent-pthreads-2.1-7", "libevent-openssl-2.1-7",
                    "libhiredis0.14", "libjansson4", "libmariadb3", "libssl3", "librabbitmq4", "adduser", "tzdata"):
            self.assertIn(lib, depends)
        # every package named is one this machine has (the binary runs here)
        for pkg in depends:
            self.assertEqual(dpkg_status(pkg), "install ok installed", f"Depends names {pkg}")

        listing = run(["dpkg-deb", "-c", self.deb]).stdout.splitlines()
        files = {line.split()[-1].lstrip("."): line.split()[0] for line in listing}
        for path, mode in {"/usr/bin/hourglassd": "-rwxr-xr-x", "/etc/hourglass/hourglass.conf": "-rw-r-----",
                           "/usr/lib/systemd/system/hourglass.service": "-rw-r--r--",
                           "/usr/share/hourglass/schema.sql": "-rw-r--r--",
                           "/usr/share/man/man8/hourglassd.8.gz": "-rw-r--r--",
                           "/usr/share/doc/hourglass/copyright": "-rw-r--r--",
                           "/usr/share/doc/hourglass/api.md": "-rw-r--r--"}.items():
            self.assertEqual(files.get(path), mode, path)
        self.assertTrue(all(" root/root " in line for line in listing), "files not owned by root")
        self.assertEqual([p for p in files if p.startswith("/usr/local")], [])

        ctl = tempfile.mkdtemp(prefix="hg-deb-")
        self.addCleanup(shutil.rmtree, ctl, True)
        run(["dpkg-deb", "-e", self.deb, ctl])
        with open(f"{ctl}/conffiles", encoding="utf-8") as f:
            self.assertEqual(f.read().split(), ["/etc/hourglass/hourglass.conf"])
        for s in ("postinst", "prerm", "postrm"):
            self.assertTrue(os.access(f"{ctl}/{s}", os.X_OK), s)
            run(["sh", "-n", f"{ctl}/{s}"])

    def refuse_if_taken(self) -> None:
        """This test installs and purges a package on the machine: never one that is not its own."""
        self.assertEqual(os.geteuid(), 0, "dpkg -i needs root: the integration tests run as root")
        status = dpkg_status()
        taken = []
        if status and status != "unknown ok not-installed":
            taken.append(f"dpkg knows a hourglass package ({status!r}): remove it (dpkg -P hourglass)")
        if user_exists() or group_exists():
            taken.append("a hourglass user or group exists: this test would delete it on purge")
        if os.path.lexists("/usr/bin/hourglassd"):
            taken.append("/usr/bin/hourglassd exists: dpkg would overwrite it")
        if taken:
            self.fail("refusing to install the package on this machine: " + "; ".join(taken))

    def restore(self) -> None:
        """Whatever an assertion left: the package purged (postrm removes the user), then anything
        a failed purge left behind."""
        if dpkg_status() not in ("", "unknown ok not-installed"):
            run(["dpkg", "--purge", "--force-remove-reinstreq", "hourglass"], check=False)
        for path in ("/etc/hourglass/hourglass.conf", "/etc/hourglass"):
            run(["dpkg-statoverride", "--remove", path], check=False)
        if user_exists():
            run(["deluser", "--system", USER], check=False)
        if group_exists():
            run(["delgroup", "--system", USER], check=False)
        for path in ("/etc/hourglass", "/var/lib/hourglass", "/var/log/hourglass"):
            shutil.rmtree(path, ignore_errors=True)

    def test_2_dpkg_install_check_remove_purge(self):
        self.refuse_if_taken()
        self.addCleanup(self.restore)
        paths = [line.split()[-1].lstrip(".").rstrip("/") or "/"
                 for line in run(["dpkg-deb", "-c", self.deb]).stdout.splitlines()]
        existed = {p for p in paths if os.path.lexists(p)}

        out = dpkg("-i", self.deb).stdout
        self.assertEqual(dpkg_status(), "install ok installed")
        self.assertIn("not started", out)
        self.assertEqual(run(["/usr/bin/hourglassd", "-v"]).stdout.strip(), f"hourglassd {self.version}")

        # the system user, and the config readable by its group alone
        u = pwd.getpwnam(USER)
        self.assertLess(u.pw_uid, 1000, "not a system user")
        self.assertEqual(u.pw_shell, "/usr/sbin/nologin")
        self.assertEqual(grp.getgrgid(u.pw_gid).gr_name, USER)
        for path, mode in (("/etc/hourglass", 0o750), ("/etc/hourglass/hourglass.conf", 0o640)):
            st = os.stat(path)
            self.assertEqual((st.st_uid, grp.getgrgid(st.st_gid).gr_name, st.st_mode & 0o777), (0, USER, mode), path)

        conf = "/etc/hourglass/hourglass.conf"
        self.assertIn("configuration OK", run(["/usr/bin/hourglassd", "-t", "-c", conf]).stdout)
        # as the unit runs it (User=hourglass)
        self.assertIn("configuration OK", run(["runuser", "-u", USER, "--", "/usr/bin/hourglassd", "-t", "-c", conf]).stdout)
        # systemd accepts the unit: ExecStart binaries present, Documentation= man page found
        run(["systemd-analyze", "verify", "/usr/lib/systemd/system/hourglass.service"])

        # a reinstall (an upgrade) keeps the operator's config and its group
        with open(conf, "a", encoding="utf-8") as f:
            f.write("# edited by the operator\n")
        dpkg("-i", self.deb)
        with open(conf, encoding="utf-8") as f:
            self.assertTrue(f.read().endswith("# edited by the operator\n"))
        self.assertEqual(grp.getgrgid(os.stat(conf).st_gid).gr_name, USER)

        # remove: the config stays (policy), and the user; nothing else of the package
        dpkg("-r", "hourglass")
        self.assertEqual(dpkg_status(), "deinstall ok config-files")
        kept = {"/etc", "/etc/hourglass", conf}
        left = [p for p in paths if p not in existed and p not in kept and os.path.lexists(p)]
        self.assertEqual(left, [], "dpkg -r left these")
        self.assertTrue(os.path.isfile(conf))
        self.assertTrue(user_exists())

        # what the unit would have made (StateDirectory, LogsDirectory) goes with a purge
        for d in ("/var/lib/hourglass", "/var/log/hourglass"):
            os.makedirs(d, exist_ok=True)
            with open(f"{d}/x", "w", encoding="utf-8") as f:
                f.write("x")
            os.chown(d, u.pw_uid, u.pw_gid)
        dpkg("-P", "hourglass")
        self.assertIn(dpkg_status(), ("", "unknown ok not-installed"))
        left = [p for p in paths if p not in existed and os.path.lexists(p)]
        self.assertEqual(left, [], "dpkg -P left these")
        for d in ("/etc/hourglass", "/var/lib/hourglass", "/var/log/hourglass"):
            self.assertFalse(os.path.lexists(d), d)
        self.assertFalse(user_exists(), "purge left the hourglass user")
        self.assertFalse(group_exists(), "purge left the hourglass group")
        self.assertNotIn("hourglass", run(["dpkg-statoverride", "--list"]).stdout)


if __name__ == "__main__":
    unittest.main()
