#!/usr/bin/env python3
"""Checks docs/METRICS.md (and the Grafana dashboard) against a saved /metrics
page of the operator, so the reference users build dashboards and alerts
from says what the operator really serves.

  hack/metrics-doc.py --check PAGE [--dashboard DASHBOARD]
  hack/metrics-doc.py --print PAGE

--check: every winpool_* metric family on PAGE (Prometheus text format) has a
row in docs/METRICS.md with the same type and the same label names (a
histogram's `le` and a summary's `quantile` are not labels of the family),
and every label value on PAGE is among the values the row lists for that
label, when it lists any; every row names a family on PAGE, except those in
CONDITIONAL below. With --dashboard, also: every winpool_* name a panel
query or template variable of DASHBOARD uses is exported (_bucket, _sum and
_count are the histogram's), and the panels have unique ids and gridPos
rectangles that do not overlap. Prints one line per problem and
`metrics-doc: N problems` last, exiting 1; or `metrics-doc: N metrics
documented` and exits 0.

--print: the METRICS.md rows for PAGE's winpool_* families (help as the
meaning), to copy a new metric's row from.

The rows of docs/METRICS.md this reads are the table lines starting with
"| `winpool_": four cells, metric in backquotes, type, labels, meaning. The
labels cell is comma-separated label names, each optionally followed by its
values in parentheses, each value in backquotes:
    pool, reason (`spec`, `annotation`, `failures`)
An empty cell means no labels.
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "METRICS.md"

# Documented metrics a page may lack, each with why. The test that saves the
# page (tests/prometheus.rs) runs a healthy operator against a simulated
# cluster; a family with no series is not on the page at all, so only metrics
# whose first series needs an event that test does not produce belong here.
CONDITIONAL: dict[str, str] = {
    # Every other family has a series from a pool's first round (the update
    # histogram at 0 included). A metric added here says why it may be absent.
    "winpool_pool_hns_pacing_budget_seconds": "absent for a pool with rollout.hnsPacing.enabled false",
}

TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
# Per-sample labels that belong to the type, not to the family.
TYPE_LABELS = {"histogram": {"le"}, "summary": {"quantile"}}
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})?\s+\S+(?:\s+\S+)?$")
LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
ROW = re.compile(r"^\|\s*`(winpool_[a-zA-Z0-9_]+)`\s*\|")
# One label of a row's labels cell: a name and, optionally, its values.
DOC_LABEL = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:\(([^()]*)\))?\s*(?:,|$)")
WINPOOL_NAME = re.compile(r"\bwinpool_[a-zA-Z0-9_]+")


class Family:
    def __init__(self, name):
        self.name, self.type, self.help = name, "untyped", ""
        self.labels = set()
        self.values = {}  # label -> values seen
        self.samples = 0


def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), s)


def parse_page(text):
    """{family name: Family} of a Prometheus text-format page, and parse problems."""
    families, problems = {}, []

    def family(name):
        return families.setdefault(name, Family(name))

    def owner(sample):
        """The family a sample belongs to: a histogram's _bucket is the histogram's."""
        if sample in families:
            return families[sample]
        for f in families.values():
            if any(sample == f.name + s for s in SUFFIXES.get(f.type, ())):
                return f
        return family(sample)

    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "HELP":
                family(parts[2]).help = unescape(parts[3]) if len(parts) > 3 else ""
            elif len(parts) >= 4 and parts[1] == "TYPE":
                family(parts[2]).type = parts[3].strip()
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append(f"page line {n}: not a sample: {line[:80]}")
            continue
        f = owner(m.group(1))
        f.samples += 1
        pairs, rest = {}, m.group(2) or ""
        pos = 0
        while pos < len(rest):
            p = LABEL_PAIR.match(rest, pos)
            if not p:
                problems.append(f"page line {n}: cannot read the labels of {m.group(1)}: {{{rest}}}")
                break
            pairs[p.group(1)] = unescape(p.group(2))
            pos = p.end()
        for k, v in pairs.items():
            if k in TYPE_LABELS.get(f.type, ()):
                continue
            f.labels.add(k)
            f.values.setdefault(k, set()).add(v)
    return families, problems


class Row:
    def __init__(self, line_no, name, type_, labels, values, meaning):
        self.line, self.name, self.type, self.labels, self.values, self.meaning = line_no, name, type_, labels, values, meaning


def split_cells(line):
    """The cells of a Markdown table line; `\\|` and `|` inside backquotes stay in their cell."""
    cells, cell, code = [], "", False
    i = 0
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] == "|":
            cell += "|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += c
        i += 1
    if cell.strip():
        cells.append(cell.strip())
    return cells


def parse_labels(cell):
    """(label names, {label: listed values}) of a labels cell, or None if it does not read."""
    labels, values, pos = [], {}, 0
    if not cell.strip():
        return labels, values
    while pos < len(cell):
        m = DOC_LABEL.match(cell, pos)
        if not m or m.end() == pos:
            return None
        labels.append(m.group(1))
        if m.group(2) is not None:
            listed = [v.strip() for v in m.group(2).split(",")]
            if not all(re.fullmatch(r"`[^`]+`", v) for v in listed):
                return None
            values[m.group(1)] = {v.strip("`") for v in listed}
        pos = m.end()
    return labels, values


def parse_doc(text):
    """{metric: Row} of the documented metrics, and problems with the rows themselves."""
    rows, problems = {}, []
    rel = DOC.relative_to(ROOT)
    for n, line in enumerate(text.splitlines(), 1):
        m = ROW.match(line)
        if not m:
            continue
        cells = split_cells(line)
        where = f"{rel}:{n}"
        if len(cells) != 4:
            problems.append(f"{where}: {m.group(1)}: a row has 4 cells (metric, type, labels, meaning), this one {len(cells)}")
            continue
        name, type_, labels_cell, meaning = m.group(1), cells[1], cells[2], cells[3]
        if type_ not in TYPES:
            problems.append(f"{where}: {name}: type {type_!r} is not one of {', '.join(sorted(TYPES))}")
        parsed = parse_labels(labels_cell)
        if parsed is None:
            problems.append(f"{where}: {name}: labels {labels_cell!r} do not read as `name (`value`, ...)`, comma-separated")
            continue
        labels, values = parsed
        if len(set(labels)) != len(labels):
            problems.append(f"{where}: {name}: a label is listed twice: {labels_cell!r}")
        if name in rows:
            problems.append(f"{where}: {name}: documented twice (also line {rows[name].line})")
            continue
        rows[name] = Row(n, name, type_, set(labels), values, meaning)
    return rows, problems


def fmt(labels):
    return "{" + ", ".join(sorted(labels)) + "}" if labels else "no labels"


def check_doc(page, rows):
    problems = []
    rel = DOC.relative_to(ROOT)
    ours = {n: f for n, f in page.items() if n.startswith("winpool_")}
    for name, f in sorted(ours.items()):
        row = rows.get(name)
        if row is None:
            problems.append(
                f"undocumented: {name} ({f.type}, {fmt(f.labels)}) is on the page but has no row in {rel}; "
                f"hack/metrics-doc.py --print PAGE prints one"
            )
            continue
        where = f"{rel}:{row.line}"
        if row.type != f.type:
            problems.append(f"type: {name} is documented as {row.type} ({where}), the page says {f.type}")
        if f.samples and row.labels != f.labels:
            said = []
            if f.labels - row.labels:
                said.append(f"undocumented {', '.join(sorted(f.labels - row.labels))}")
            if row.labels - f.labels:
                said.append(f"missing {', '.join(sorted(row.labels - f.labels))}")
            problems.append(f"labels: {name} is documented with {fmt(row.labels)} ({where}), the page has {fmt(f.labels)}: {'; '.join(said)}")
        for label, listed in sorted(row.values.items()):
            extra = f.values.get(label, set()) - listed
            if extra:
                problems.append(
                    f"label values: {name} has {label}={', '.join(sorted(repr(v) for v in extra))} on the page; "
                    f"{where} lists only {', '.join(sorted(listed))}"
                )
    for name, row in sorted(rows.items()):
        if name in ours or name in CONDITIONAL:
            continue
        problems.append(f"not exported: {name} is documented ({rel}:{row.line}) but is not on the page")
    for name in sorted(CONDITIONAL):
        if name not in rows:
            problems.append(f"hack/metrics-doc.py: CONDITIONAL names {name}, which {rel} does not document")
    return problems


def panels(dashboard):
    """Every panel and the grid it is laid out in: a collapsed row keeps its
    panels in a grid of their own, placed when the row is expanded."""
    for p in dashboard.get("panels", []):
        yield p, None
        for inner in p.get("panels", []) or []:
            yield inner, p.get("id")


def check_dashboard(path, page, rows):
    problems = []
    try:
        dashboard = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        return [f"dashboard: {path}: {e}"], 0
    # The series names a query may use: a histogram's _bucket, _sum and _count,
    # not its bare name; a CONDITIONAL metric's as documented.
    families = {n: f.type for n, f in page.items() if n.startswith("winpool_")}
    families.update({n: rows[n].type for n in CONDITIONAL if n in rows and n not in families})
    series = {}
    for n, t in families.items():
        for s in SUFFIXES.get(t, ("",)):
            series[n + s] = n
    queries = 0

    def check_expr(what, expr):
        for n in sorted(set(WINPOOL_NAME.findall(expr))):
            if n not in series and SUFFIXES.get(families.get(n)):
                problems.append(f"dashboard: {what} uses {n}, a {families[n]}: query its {', '.join(n + s for s in SUFFIXES[families[n]])}")
            elif n not in series:
                problems.append(f"dashboard: {what} uses {n}, which the page does not export")
            elif series[n] not in rows:
                problems.append(f"dashboard: {what} uses {n}, which {DOC.relative_to(ROOT)} does not document")

    for v in dashboard.get("templating", {}).get("list", []):
        q = v.get("query")
        for expr in (q.get("query", "") if isinstance(q, dict) else q or "", v.get("definition", "")):
            if isinstance(expr, str) and expr:
                check_expr(f"variable {v.get('name')!r}", expr)
    ids, boxes = {}, {}
    for p, container in panels(dashboard):
        title = p.get("title", "")
        pid = p.get("id")
        if pid in ids:
            problems.append(f"dashboard: panels {ids[pid]!r} and {title!r} share id {pid}")
        ids[pid] = title
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in "xywh"):
            problems.append(f"dashboard: panel {title!r} (id {pid}) has no complete gridPos")
        else:
            if g["x"] < 0 or g["x"] + g["w"] > 24:
                problems.append(f"dashboard: panel {title!r} (id {pid}) is outside the 24 columns: {g}")
            for other, og in boxes.get(container, []):
                if g["x"] < og["x"] + og["w"] and og["x"] < g["x"] + g["w"] and g["y"] < og["y"] + og["h"] and og["y"] < g["y"] + g["h"]:
                    problems.append(f"dashboard: panel {title!r} (id {pid}) overlaps {other!r}: {g} and {og}")
            boxes.setdefault(container, []).append((title, g))
        for t in p.get("targets", []) or []:
            if t.get("expr"):
                queries += 1
                check_expr(f"panel {title!r} (id {pid}) query {t.get('refId', '?')}", t["expr"])
    return problems, queries


def print_rows(page):
    print("| metric | type | labels | meaning |")
    print("|---|---|---|---|")
    for name, f in sorted(page.items()):
        if name.startswith("winpool_"):
            meaning = f.help.replace("|", "\\|").replace("\n", " ")
            labels = sorted(f.labels, key=lambda l: (l != "pool", l))  # the table puts pool first
            print(f"| `{name}` | {f.type} | {', '.join(labels)} | {meaning} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="PAGE", help="check docs/METRICS.md against a saved /metrics page")
    mode.add_argument("--print", metavar="PAGE", dest="print_page", help="print METRICS.md rows for the page's metrics")
    ap.add_argument("--dashboard", metavar="DASHBOARD", help="with --check: also check this Grafana dashboard JSON")
    args = ap.parse_args()
    if args.dashboard and not args.check:
        ap.error("--dashboard goes with --check PAGE")
    page_path = args.check or args.print_page
    try:
        page, problems = parse_page(Path(page_path).read_text())
    except OSError as e:
        print(f"metrics-doc: cannot read {page_path}: {e}", file=sys.stderr)
        return 2
    if args.print_page:
        print_rows(page)
        return 0
    if not any(n.startswith("winpool_") for n in page):
        problems.append(f"{page_path}: no winpool_* metrics on the page; is it the operator's /metrics?")
    rows, doc_problems = parse_doc(DOC.read_text())
    problems += doc_problems + check_doc(page, rows)
    queries = 0
    if args.dashboard:
        dash_problems, queries = check_dashboard(args.dashboard, page, rows)
        problems += dash_problems
    for p in problems:
        print(p)
    if problems:
        print(f"metrics-doc: {len(problems)} problem{'' if len(problems) == 1 else 's'}")
        return 1
    for name in sorted(set(CONDITIONAL) - set(page)):
        print(f"metrics-doc: {name} is not on the page, allowed: {CONDITIONAL[name]}")
    tail = f"; the dashboard's {queries} queries use only exported metrics" if args.dashboard else ""
    print(f"metrics-doc: {len(rows)} metrics documented{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
