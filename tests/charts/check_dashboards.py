#!/usr/bin/env python3
"""Structure checks for the Grafana dashboards shipped in the chart.

For each dashboard JSON file:
  - it parses, has a title, a uid and unique panel ids;
  - a templating variable `datasource` of type `datasource` (query prometheus),
    plus the variables named with --require-vars;
  - no hard-coded datasource: every `datasource` reference (panels, targets,
    variables) is the ${datasource} variable; only Grafana's built-in
    annotation source may name a uid; no __inputs / ${DS_...} export leftovers;
  - every data panel (rows and text panels excepted) has targets, each with a
    non-empty PromQL `expr` whose brackets, braces and quotes balance;
  - every metric name in an expr or variable query is one the project exports:
    the tables of docs/metrics.md (workers) or the .Name("...") calls of
    controller/scheduling/metrics.cpp (controller); _bucket/_sum/_count only on
    histograms; every function is a PromQL function;
  - every $variable in an expr is defined (or one of Grafana's $__ builtins).

  - with --promtool, every expr (Grafana variables substituted) parses with
    Prometheus' own parser (`promtool check rules`).

Usage: check_dashboards.py --repo DIR [--require-vars a,b] [--title-prefix P]
                           [--promtool PATH] [--expect-reject REGEX]... FILE...
Exit 0 when every file passes; 1 with one line per problem otherwise.
"""
import argparse
import json
import re
import sys
from pathlib import Path

PROMQL_FUNCS = {
    # aggregations
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
    "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
    "histogram_stdvar", "histogram_sum", "holt_winters", "double_exponential_smoothing", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
    "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sort_by_label",
    "sort_by_label_desc", "sqrt", "time", "timestamp", "vector", "year", "avg_over_time", "min_over_time",
    "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time", "stddev_over_time",
    "stdvar_over_time", "last_over_time", "present_over_time", "mad_over_time", "acos", "acosh", "asin",
    "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "pi",
    # Grafana variable-query helpers
    "label_values", "label_names", "metrics", "query_result",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
            "unless", "inf", "nan", "atan2", "start", "end"}
DATA_PANELS = {"timeseries", "stat", "gauge", "bargauge", "table", "state-timeline", "status-history",
               "heatmap", "piechart", "barchart", "histogram", "graph", "singlestat", "xychart", "trend"}
LAYOUT_PANELS = {"row", "text", "dashlist", "news", "annolist"}
DS_VAR = {"${datasource}", "$datasource"}
BUILTIN_VARS = {"__rate_interval", "__interval", "__range", "__range_s", "__range_ms", "__interval_ms",
                "__from", "__to", "__dashboard", "__name", "__org", "__user", "__all"}


def known_metrics(repo: Path):
    """name -> type ('counter' | 'gauge' | 'histogram' | ...)."""
    out = {}
    doc = (repo / "docs" / "metrics.md").read_text(encoding="utf-8")
    for m in re.finditer(r"^\|\s*`(greenshard_[a-z0-9_]+)`\s*\|\s*([a-z]+)\s*\|", doc, re.M):
        out[m.group(1)] = m.group(2)
    src = (repo / "controller" / "scheduling" / "metrics.cpp").read_text(encoding="utf-8")
    for m in re.finditer(r"Build(Counter|Gauge|Histogram|Summary)\(\)\s*\.Name\(\"([a-zA-Z0-9_:]+)\"\)", src):
        out[m.group(2)] = m.group(1).lower()
    return out


def strip_expr(expr: str) -> str:
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # string literals
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"\{[^{}]*\}", " ", e)                      # label matchers
    e = re.sub(r"\[[^\[\]]*\]", " ", e)                    # range / subquery selectors
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", r" \1 ", e)
    e = re.sub(r"\boffset\s+-?[0-9a-zA-Z$_{}]+", " ", e)   # offset 1d
    e = re.sub(r"(?<![A-Za-z_:])[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?", " ", e)  # numbers
    return e


def balanced(expr: str) -> bool:
    stack, pairs = [], {")": "(", "]": "[", "}": "{"}
    in_str = None
    i = 0
    while i < len(expr):
        ch = expr[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == in_str:
                in_str = None
        elif ch in "\"'`":
            in_str = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            if not stack or stack.pop() != pairs[ch]:
                return False
        i += 1
    return not stack and in_str is None


ALL_EXPRS = []  # (where, expr) for the promtool parse


def grafana_to_promql(expr: str) -> str:
    """Substitutes Grafana variables the way Grafana would before querying."""
    e = re.sub(r"\$\{?__rate_interval\}?|\$\{?__interval\}?", "1m", expr)
    e = re.sub(r"\$\{?__range\}?", "1h", e)
    e = re.sub(r"\$\{?__range_s\}?", "3600", e)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", ".*", e)


def promtool_parse(promtool, problems):
    """Parses every expr with Prometheus' own parser (promtool check rules)."""
    import subprocess
    import tempfile
    for where, expr in ALL_EXPRS:
        rule = {"groups": [{"name": "dashboard", "rules": [{"record": "greenshard:check", "expr": grafana_to_promql(expr)}]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(rule, f)  # JSON is YAML
        r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
        Path(f.name).unlink()
        if r.returncode != 0:
            msg = (r.stderr or r.stdout).strip().splitlines()
            problems.append(f"{where}: promtool: {msg[-1] if msg else 'parse error'}")


def check_expr(where, expr, metrics, variables, problems):
    if not isinstance(expr, str) or not expr.strip():
        problems.append(f"{where}: empty expr")
        return set()
    ALL_EXPRS.append((where, expr))
    if not balanced(expr):
        problems.append(f"{where}: unbalanced brackets or quotes in {expr!r}")
    for v in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expr):
        if v not in variables and v not in BUILTIN_VARS:
            problems.append(f"{where}: ${v} is not a dashboard variable")
    used = set()
    e = strip_expr(expr)
    e = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", " ", e)
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        tok = m.group(0)
        rest = e[m.end():].lstrip()
        if tok in KEYWORDS:
            continue
        if rest.startswith("("):
            if tok not in PROMQL_FUNCS:
                problems.append(f"{where}: unknown function {tok}()")
            continue
        if tok in KEYWORDS or tok in PROMQL_FUNCS:
            continue
        used.add(tok)
        base, suffix = tok, ""
        for s in ("_bucket", "_sum", "_count"):
            if tok.endswith(s) and tok[: -len(s)] in metrics:
                base, suffix = tok[: -len(s)], s
        if base not in metrics:
            problems.append(f"{where}: metric {tok} is not in docs/metrics.md or controller/scheduling/metrics.cpp")
        elif suffix and metrics[base] not in ("histogram", "summary"):
            problems.append(f"{where}: {tok}: {base} is a {metrics[base]}, not a histogram")
        elif not suffix and metrics[base] == "histogram":
            problems.append(f"{where}: {tok} is a histogram; use {tok}_bucket/_sum/_count")
    return used


def walk(node, path="$"):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def all_panels(panels):
    for p in panels or []:
        yield p
        yield from all_panels(p.get("panels"))


def check_file(path: Path, metrics, require_vars, title_prefix):
    problems = []
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"{path}: not valid JSON: {e}"]
    name = path.name
    if not d.get("title"):
        problems.append(f"{name}: no title")
    elif title_prefix and not d["title"].startswith(title_prefix):
        problems.append(f"{name}: title {d['title']!r} does not start with {title_prefix!r}")
    if not d.get("uid"):
        problems.append(f"{name}: no uid")
    if "__inputs" in d:
        problems.append(f"{name}: has __inputs (an export for sharing); provisioned dashboards use the datasource variable")

    variables = {}
    for v in (d.get("templating") or {}).get("list", []):
        variables[v.get("name")] = v
    ds = variables.get("datasource")
    if not ds:
        problems.append(f"{name}: no templating variable 'datasource'")
    elif ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{name}: variable 'datasource' must be type datasource with query prometheus")
    for rv in require_vars:
        if rv not in variables:
            problems.append(f"{name}: no templating variable {rv!r}")
    for vn, v in variables.items():
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            lv = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", q or "")
            if lv:  # label_values(selector, label): the label is not a metric
                q = lv.group(1)
            elif re.fullmatch(r"\s*label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", q or ""):
                continue
            check_expr(f"{name}: variable {vn}", q, metrics, variables, problems)

    # No hard-coded datasources anywhere.
    for p, node in walk(d):
        if "datasource" not in node:
            continue
        ref = node["datasource"]
        if ref is None:
            continue
        if isinstance(ref, str):
            if ref not in DS_VAR:
                problems.append(f"{name}: {p}.datasource is {ref!r}, not the ${{datasource}} variable")
        elif isinstance(ref, dict):
            uid = ref.get("uid")
            builtin = ref.get("type") == "grafana" and uid in ("-- Grafana --", "grafana")
            if uid is not None and uid not in DS_VAR and not builtin:
                problems.append(f"{name}: {p}.datasource.uid is {uid!r} (hard-coded); use ${{datasource}}")
        else:
            problems.append(f"{name}: {p}.datasource has an unexpected type")
    text = json.dumps(d)
    if re.search(r"\$\{DS_[A-Z0-9_]+\}", text):
        problems.append(f"{name}: ${{DS_...}} export placeholder found")

    ids = set()
    data_panels = 0
    for panel in all_panels(d.get("panels")):
        pid = panel.get("id")
        where = f"{name}: panel {pid} {panel.get('title')!r}"
        if pid in ids:
            problems.append(f"{where}: duplicate panel id")
        ids.add(pid)
        gp = panel.get("gridPos") or {}
        if gp.get("x", 0) + gp.get("w", 0) > 24:
            problems.append(f"{where}: gridPos wider than 24 columns")
        ptype = panel.get("type")
        if ptype in LAYOUT_PANELS:
            continue
        if ptype not in DATA_PANELS:
            problems.append(f"{where}: unknown panel type {ptype!r}")
            continue
        data_panels += 1
        if not panel.get("title"):
            problems.append(f"{where}: no title")
        ds_ref = panel.get("datasource")
        if not (isinstance(ds_ref, dict) and ds_ref.get("uid") in DS_VAR):
            problems.append(f"{where}: panel datasource must be {{'uid': '${{datasource}}'}}")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        for t in targets:
            check_expr(f"{where} target {t.get('refId')}", t.get("expr"), metrics, variables, problems)
    if data_panels == 0:
        problems.append(f"{name}: no data panels")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--require-vars", default="")
    ap.add_argument("--title-prefix", default="")
    ap.add_argument("--expect-reject", action="append", default=[],
                    help="the files must fail, with a problem matching each REGEX")
    ap.add_argument("--promtool", default="", help="also parse every expr with this promtool")
    ap.add_argument("files", nargs="+", type=Path)
    a = ap.parse_args()
    metrics = known_metrics(a.repo)
    if len(metrics) < 10:
        print(f"check_dashboards: only {len(metrics)} metric names found in the docs/source", file=sys.stderr)
        return 1
    require = [v for v in a.require_vars.split(",") if v]
    problems = []
    for f in a.files:
        problems += check_file(f, metrics, require, a.title_prefix)
    if a.promtool:
        promtool_parse(a.promtool, problems)
    if a.expect_reject:
        missing = [r for r in a.expect_reject if not any(re.search(r, p) for p in problems)]
        for p in problems:
            print(f"(expected) {p}")
        for r in missing:
            print(f"check_dashboards: no problem matches /{r}/", file=sys.stderr)
        if not problems:
            print("check_dashboards: expected a rejection, but everything passed", file=sys.stderr)
        return 1 if (missing or not problems) else 0
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_dashboards: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_dashboards: {len(a.files)} dashboard(s) ok ({len(metrics)} known metric names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
