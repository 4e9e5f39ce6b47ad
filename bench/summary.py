#!/usr/bin/env python3
"""bench/summary.py — the one screen docs/performance.md opens with, from one run's JSON.

    python3 bench/summary.py RESULTS.json DOC.md [--commit C] [--date D]

Rewrites what lies between the two marker lines

    <!-- bench:summary:begin -->
    <!-- bench:summary:end -->

in DOC.md (docs/performance.md) with a table of the run's figures: each row that has a target
(its value, PASS or FAIL, and why a row failed when the runs under it did not count), every other
row that FAILED, and for a figure without a target its first row. The heading line names the
commit and the date, and says so when the run was not a full one. Nothing outside the markers
changes; a DOC.md without exactly one pair of them, in order, is an error (exit 1) and is left as
it was.

bench/run.sh calls it at the end of a full run of every phase (`make bench`), with the commit
(`git rev-parse --short HEAD`, "+dirty" when the tree has changes) and the run's date. It is a
script of its own rather than an option of bench/report.py because it reads the JSON, not the
raw results: any stored run can be put at the top again without running report.py over it.
"""
import argparse
import json
import os
import sys

BEGIN = "<!-- bench:summary:begin -->"
END = "<!-- bench:summary:end -->"

# every figure of bench/run.sh, to say which ones a run left out
FIGURES = {
    0: "group commit", 1: "push vs bare HTTP", 2: "lateness", 3: "consume", 4: "a large backlog",
    5: "restore", 6: "Redis bytes per job", 7: "webhook delivery", 8: "amqp delivery",
    9: "Redis bytes per far job", 10: "far vs near pushes", 11: "a far backlog", 12: "restore beside far jobs",
    13: "paging a bucket", 14: "a purge beside live traffic", 15: "Redis Cluster", 16: "Galera",
    17: "flow control by key", 18: "peers: BullMQ and beanstalkd",
}


def cell(text):
    """A table cell: no pipe or newline breaks the row; >= and <= read as the signs."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace(">=", "≥").replace("<=", "≤")


def pick(rows):
    """The rows of the screen: those with a target, those that failed, and for a figure without a
    target its first measured row (its headline)."""
    targeted = {r["figure"] for r in rows if r["target"] != "-"}
    out, headline = [], set()
    for r in rows:
        if r["target"] != "-" or r["result"] == "FAIL":
            out.append(r)
        elif r["figure"] not in targeted and r["figure"] not in headline and r["result"] != "skip" \
                and r["name"] != "note":
            headline.add(r["figure"])
            out.append(r)
    return out


def result_cell(r):
    if r["result"] == "skip":
        return "–"
    if r["result"] != "FAIL":
        return r["result"]
    why = r.get("problems") or []
    return "**FAIL**" + (": " + "; ".join(why) if why else "")


def render(doc, commit=None, date=None, source=None):
    """The lines between the markers (without them) for one run's JSON (bench/report.py's)."""
    rows = doc.get("figures", [])
    commit = commit or doc.get("commit") or "?"
    date = date or doc.get("date") or "?"
    mode = doc.get("mode", "?")
    phases = (doc.get("raw") or {}).get("phases")
    passed = sum(r["result"] == "PASS" for r in rows)
    failed = sum(r["result"] == "FAIL" for r in rows)
    if mode == "full":
        head = f"**Latest full run of `make bench`: {date}, commit `{commit}`**"
    else:
        head = (f"**Newest run, NOT a full one ({mode} mode: reduced sizes{', phases: ' + phases if phases else ''}; "
                f"no full run's results were found): {date}, commit `{commit}`**")
    lines = [
        "<!-- written by bench/summary.py at the end of `make bench` (a full run of every phase); edits here are"
        " overwritten -->",
        f"{head} — {passed} pass, {failed} fail.",
        "",
        "| # | figure | target | latest | result |",
        "|---|---|---|---|---|",
    ]
    for r in pick(rows):
        value = r["display"]
        if r["result"] == "skip":  # and why, when the row says (figure 18: a peer that could not run)
            value = "not measured in this run" + (f": {r['notes']}" if r.get("notes") else "")
        target = "–" if r["target"] == "-" else r["target"]
        lines.append(f"| {r['figure']} | {cell(r['name'])} | {cell(target)} | {cell(value)} | "
                     f"{cell(result_cell(r))} |")
    seen = {r["figure"] for r in rows if r["result"] != "skip"}
    absent = [f"{f} ({name})" for f, name in FIGURES.items() if f not in seen]
    lines.append("")
    if absent:
        lines += [f"Not measured in this run: {', '.join(absent)}.", ""]
    where = f"`bench/results/{os.path.basename(source)}`" if source else "the run's JSON"
    lines.append(f"The whole table, the daemon's own view of each measurement and its raw data: {where} (not "
                 f"committed). What each figure means: \"What each figure means\" below; the dated log of runs "
                 f"follows this block.")
    return "\n".join(lines) + "\n"


def rewrite(text, block):
    """TEXT with what lies between the markers replaced by BLOCK; ValueError when the markers are
    not there exactly once each, begin before end, each on a line of its own."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"want exactly one {BEGIN} and one {END}")
    b = text.index(BEGIN) + len(BEGIN)
    e = text.index(END)
    if e < b or not text[b:].startswith("\n") or (e > 0 and text[e - 1] != "\n"):
        raise ValueError(f"{BEGIN} must come before {END}, each on a line of its own")
    return text[:b + 1] + block + text[e:]


def main(argv=None):
    ap = argparse.ArgumentParser(description="rewrite docs/performance.md's summary block from one run's JSON")
    ap.add_argument("results", help="a bench/results/<timestamp>.json written by bench/report.py")
    ap.add_argument("doc", help="the Markdown file holding the markers (docs/performance.md)")
    ap.add_argument("--commit", help="the commit to name (default: the JSON's)")
    ap.add_argument("--date", help="the date to name (default: the JSON's)")
    args = ap.parse_args(argv)
    with open(args.results, encoding="utf-8") as f:
        doc = json.load(f)
    with open(args.doc, encoding="utf-8") as f:
        text = f.read()
    try:
        new = rewrite(text, render(doc, args.commit, args.date, args.results))
    except ValueError as e:
        print(f"bench/summary.py: {args.doc}: {e}; left as it was", file=sys.stderr)
        return 1
    if new != text:
        tmp = args.doc + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, args.doc)
    print(f"summary: {args.doc} now opens with {os.path.basename(args.results)} (commit "
          f"{args.commit or doc.get('commit')}, {args.date or doc.get('date')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
