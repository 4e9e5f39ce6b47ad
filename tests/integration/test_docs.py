"""The documentation tells the truth about the things it can be checked against.

    make integration T=test_docs
"""
import json
import os
import re
import subprocess
import unittest

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


class DocsTest(unittest.TestCase):
    def test_config_table_matches_the_binary(self):
        table = subprocess.run([harness.daemon_binary(), "-d"], check=True, capture_output=True,
                               text=True).stdout
        doc = read("docs/operations.md")
        m = re.search(r"<!-- config-table:begin[^>]*-->\n(.*?)<!-- config-table:end -->", doc, re.S)
        self.assertIsNotNone(m, "docs/operations.md lost its config-table markers")
        self.assertEqual(m.group(1), table,
                         "docs/operations.md config table is stale: regenerate it with `hourglassd -d`")

    def test_every_contract_config_key_exists(self):
        table = subprocess.run([harness.daemon_binary(), "-d"], check=True, capture_output=True,
                               text=True).stdout
        keys = {(row.split("|")[1].strip(), row.split("|")[2].strip())
                for row in table.splitlines()[2:]}
        contract = {
            "http": ["listen", "threads", "max_body", "longpoll_max", "token", "admin_token"],
            "redis": ["address", "password", "db", "prefix", "shards"],
            "mysql": ["host", "port", "hosts", "socket", "user", "password", "database", "retention_days"],
            "queue": ["default_ttr", "default_tries", "max_delay"],
            "log": ["level", "file"],
        }
        for section, names in contract.items():
            for name in names:
                self.assertIn((section, name), keys, f"[{section}] {name} missing")

    def test_api_doc_has_a_curl_example_for_every_endpoint(self):
        doc = read("docs/api.md")
        for path in ["/push", "/get/", "/finish", "/release", "/touch", "/delete", "/reschedule",
                     "/jobs/", "/dead/", "/reStore?", "/reStore/", "/health", "/stats", "/metrics",
                     "/jobs?state=", "/throughput", "/fleet", "/console/", "/jobs?topic=", "/purge?state="]:
            self.assertRegex(doc, r"curl [^\n]*" + re.escape(path), f"no curl example for {path}")

    def test_readme_opens_with_the_two_commands(self):
        head = "\n".join(read("README.md").splitlines()[:8])
        self.assertIn("make run", head)
        self.assertIn("make test", head)

    def test_sample_config_is_valid(self):
        out = subprocess.run([harness.daemon_binary(), "-t", "-c", os.path.join(ROOT, "conf/hourglass.conf")],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)


if __name__ == "__main__":
    unittest.main()


class ReadmeTryItTest(harness.HourglassTestCase):
    """The README's "Try it" commands, run as written against a daemon (only the address is
    this test's daemon's, and the example id is the one the push answered), give answers of
    the shape the README shows."""

    def block(self):
        text = read("README.md")
        section = text[text.index("## Try it"):]
        body = section[section.index("```sh") + 5:]
        return body[:body.index("```")]

    def commands(self):
        """[(curl command, the answer the README shows after it as a comment)]."""
        out, cmd, shown = [], None, []
        for line in self.block().splitlines():
            if line.startswith("curl "):
                if cmd:
                    out.append((cmd, " ".join(shown)))
                cmd, shown = line, []
            elif cmd and line.startswith("     "):  # continuation of a curl line
                cmd = cmd.rstrip("\\").rstrip() + " " + line.strip()
            elif cmd and not shown and line.startswith("# {"):
                shown.append(line[2:].strip())
            elif cmd and shown and line.startswith("#  "):  # the answer goes on
                shown.append(line[2:].strip())
        out.append((cmd, " ".join(shown)))
        return out

    def test_try_it_works_as_written(self):
        d = self.start_daemon()
        d.wait_ready(15)
        cmds = self.commands()
        self.assertEqual([c.split()[0] for c, _ in cmds], ["curl"] * 4, cmds)
        example_id = re.search(r'"id":"(\d+)"', cmds[0][1]).group(1)
        job_id = None
        for cmd, shown in cmds:
            cmd = cmd.replace("localhost:8080", f"{harness.HOST}:{d.port}")
            if job_id:
                cmd = cmd.replace(example_id, job_id)
            r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{cmd}: {r.stderr}")
            got = json.loads(r.stdout)
            if shown:
                self.assertEqual(sorted(got), sorted(json.loads(shown)), f"{cmd}: answer {got}, README shows {shown}")
            job_id = job_id or got["id"]
            self.assertEqual(got["id"], job_id, f"{cmd}: {got}")
        self.assertEqual(got["state"], "finished", f"the last command shows the finished job: {got}")


class AdminRoutesDocTest(harness.HourglassTestCase):
    """docs/api.md's Authentication table lists exactly the routes that need the admin token:
    with only an admin token configured, a request without a token is answered 401 by those
    and by no other route. ROUTES is every (method, path) the router takes
    (src/core/router.c, router_method_allowed), with arguments that make the ordinary ones do
    nothing (an unknown id, a bad body, timeout=0)."""

    ROUTES = [(m, p) for p, ms in [
        ("/push", "POST"), ("/get/docs.t?timeout=0", "GET POST"), ("/finish?id=1", "GET POST"),
        ("/release?id=1", "GET POST"), ("/touch?id=1", "GET POST"), ("/delete?id=1", "GET POST"),
        ("/reschedule?id=1&delay=1", "GET POST"), ("/reStore?expire=false", "GET POST"), ("/reStore/1", "GET POST"),
        ("/jobs/1", "GET HEAD"), ("/jobs?topic=docs.t&bizKey=k", "GET HEAD"), ("/dead/docs.t", "GET HEAD"),
        ("/health", "GET HEAD"), ("/stats", "GET HEAD"), ("/metrics", "GET HEAD"), ("/topics", "GET HEAD"),
        ("/topics/docs.t", "GET HEAD PUT DELETE"), ("/topics/docs.t/jobs?state=ready", "GET HEAD"),
        ("/topics/docs.t/purge?state=dead", "POST"), ("/schedules", "GET HEAD POST"),
        ("/schedules/1", "GET HEAD PUT DELETE"), ("/fleet", "GET HEAD"), ("/throughput", "GET HEAD"),
        ("/console", "GET HEAD"), ("/console/", "GET HEAD"), ("/console/console.js", "GET HEAD")] for m in ms.split()]

    def documented(self) -> set[tuple[str, str]]:
        text = read("docs/api.md")
        section = text[text.index("## Authentication\n"):text.index("\n## ", text.index("## Authentication\n") + 1)]
        out = set()
        for row in re.findall(r"^\| ([A-Z, ]+) \| (.*) \|$", section, re.M):
            for method in row[0].split(", "):
                for path in re.findall(r"`(/[^`]*)`", row[1]):
                    out.add((method, path))
        return out

    @staticmethod
    def doc_path(path: str) -> str:
        """The request path as the table writes it: arguments as {topic}/{id}, no query."""
        path = path.split("?")[0].replace("docs.t", "{topic}")
        path = re.sub(r"/\d+$", "/{id}", path)
        return "/console/" if path.startswith("/console/") else path

    def test_authentication_table_lists_every_admin_route(self):
        d = self.start_daemon({"http": {"token": "", "admin_token": "docs-admin-token"}})
        d.wait_ready(15)
        admin, answers = set(), {}
        for method, path in self.ROUTES:
            r = d.request(method, path, body=b"" if method in ("POST", "PUT") else None)
            answers[(method, path)] = r.status
            if r.status == 401:
                admin.add((method, self.doc_path(path)))
            else:  # the route is one: neither an unknown path nor a method it does not take
                self.assertNotEqual(r.status, 405, f"{method} {path}: {r.body[:200]!r}")
                self.assertNotIn(b"no such endpoint", r.body, f"{method} {path}")
        self.assertEqual(self.documented(), admin,
                         f"docs/api.md's Authentication table vs the routes answering 401 without the admin token "
                         f"(every answer: {answers})")
