#!/usr/bin/env python3
"""greenshard-sim's file outputs, checked against its own stdout.

Runs the real binary on a small simulation with --csv, --jobs-csv, --svg and
--write-trace, then again with --trace reading that trace back, and checks:
  * the CSV has the header and one row per policy, with the numbers the
    table on stdout prints (total/operational/embodied, saved %, misses, mean
    and p95 delay);
  * the jobs CSV has one row per job and policy, adding up to the totals,
    the misses and the mean/p95 delay, and (for single-window plans) to the
    per-region GPU-hours table on stdout;
  * the SVG is well-formed XML with one intensity series per region and a
    rectangle for each chosen run window in the week;
  * the --trace rerun reproduces the same totals.

usage: sim_cli_test.py PATH/TO/greenshard-sim
"""
import csv
import math
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

REGIONS = ["GB", "DE", "CA-ON"]
POLICIES = ["fifo", "temporal", "spatial", "spatio-temporal", "oracle"]
WEEK = "2023-03-06"
COMMON = ["--regions", ",".join(REGIONS), "--capacity", "64"]
CSV_HEADER = ("policy,forecast,jobs,total_g,operational_g,embodied_g,saved_pct_vs_fifo,"
              "deadline_misses,mean_delay_h,p95_delay_h")
JOBS_HEADER = "policy,job,region,start,end,windows,grams,expected_grams,delay_h,deadline_missed,fallback"
SVG_NS = "{http://www.w3.org/2000/svg}"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def close(a, b, tol):
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


def run(sim, args):
    p = subprocess.run([sim] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"greenshard-sim {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


def parse_stdout(out):
    """Returns ({policy: row}, {region: {policy: k GPU-h}})."""
    lines = out.splitlines()
    table, load = {}, {}
    i = next(k for k, l in enumerate(lines) if l.split()[:2] == ["policy", "forecast"])
    for l in lines[i + 1:]:
        f = l.split()
        if not f:
            break
        table[f[0]] = dict(forecast=f[1], jobs=int(f[2]), total_t=float(f[3]), oper_t=float(f[4]),
                           emb_t=float(f[5]), saved=float(f[6]), misses=int(f[7]), mean=float(f[8]),
                           p95=float(f[9]))
    j = next(k for k, l in enumerate(lines) if l.startswith("GPU-h (k)"))
    cols = lines[j].split()[2:]
    for l in lines[j + 1:]:
        f = l.split()
        if not f:
            break
        load[f[0]] = dict(zip(cols, map(float, f[1:])))
    return table, load


def t(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def read_csv(path, header):
    text = Path(path).read_text()
    check(text.splitlines()[0] == header, f"{path}: header is {text.splitlines()[0]!r}")
    return list(csv.DictReader(text.splitlines()))


def main():
    sim = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        out = run(sim, COMMON + ["--jobs-per-workday", "4", "--from", WEEK, "--to", "2023-03-18",
                                 "--write-trace", str(d / "trace.csv"), "--csv", str(d / "results.csv"),
                                 "--jobs-csv", str(d / "jobs.csv"), "--svg", str(d / "week.svg"), "--week", WEEK])
        table, load = parse_stdout(out)
        check(list(table) == POLICIES, f"stdout policies {list(table)}")

        trace = {r["id"]: r for r in csv.DictReader((d / "trace.csv").read_text().splitlines())}
        n = len(trace)
        check(n > 10, f"trace has {n} jobs")

        # --- results CSV: one row per policy, same numbers as the table.
        rows = read_csv(d / "results.csv", CSV_HEADER)
        check([r["policy"] for r in rows] == POLICIES, f"results.csv policies {[r['policy'] for r in rows]}")
        for r in rows:
            s = table.get(r["policy"])
            if s is None:
                continue
            p = r["policy"]
            check(r["forecast"] == s["forecast"], f"{p}: forecast {r['forecast']} vs {s['forecast']}")
            check(int(r["jobs"]) == n == s["jobs"], f"{p}: jobs {r['jobs']} vs table {s['jobs']}, trace {n}")
            for col, key in [("total_g", "total_t"), ("operational_g", "oper_t"), ("embodied_g", "emb_t")]:
                check(close(float(r[col]) / 1e6, s[key], 0.0051), f"{p}: {col} {r[col]} vs table {s[key]} t")
            check(close(float(r["saved_pct_vs_fifo"]), s["saved"], 0.0051), f"{p}: saved {r['saved_pct_vs_fifo']}")
            check(int(r["deadline_misses"]) == s["misses"], f"{p}: misses {r['deadline_misses']}")
            check(close(float(r["mean_delay_h"]), s["mean"], 0.0051), f"{p}: mean delay {r['mean_delay_h']}")
            check(close(float(r["p95_delay_h"]), s["p95"], 0.0051), f"{p}: p95 delay {r['p95_delay_h']}")
        check(float(rows[0]["saved_pct_vs_fifo"]) == 0, "fifo saves 0 % vs itself")
        check(float(rows[3]["total_g"]) < float(rows[0]["total_g"]), "spatio-temporal emits less than fifo")

        # --- jobs CSV: one row per (policy, job), adding up to the results.
        jobs = read_csv(d / "jobs.csv", JOBS_HEADER)
        check(len(jobs) == len(POLICIES) * n, f"jobs.csv has {len(jobs)} rows for {len(POLICIES)} x {n}")
        load_checked = []
        by_policy = {p: [j for j in jobs if j["policy"] == p] for p in POLICIES}
        results = {r["policy"]: r for r in rows}
        for p, js in by_policy.items():
            ids = [j["job"] for j in js]
            check(sorted(ids) == sorted(trace), f"{p}: jobs.csv ids are not the trace's, each once")
            check(all(j["region"] in REGIONS for j in js), f"{p}: a job in an unknown region")
            if p not in results:
                continue
            res = results[p]
            grams = sum(float(j["grams"]) for j in js)
            check(close(grams, float(res["total_g"]), 1e-3 * n + 1e-6 * grams),
                  f"{p}: jobs' grams add up to {grams}, results say {res['total_g']}")
            misses = sum(j["deadline_missed"] == "true" for j in js)
            check(misses == int(res["deadline_misses"]), f"{p}: {misses} missed in jobs.csv")
            delays = sorted(float(j["delay_h"]) for j in js)
            check(close(sum(delays) / n, float(res["mean_delay_h"]), 1e-3), f"{p}: mean delay from jobs.csv")
            check(close(delays[math.ceil(0.95 * n) - 1], float(res["p95_delay_h"]), 1e-3), f"{p}: p95 delay")
            for j in js:
                job = trace[j["job"]]
                start, end = t(j["start"]), t(j["end"])
                check(start >= t(job["submit"]), f"{p}/{j['job']}: starts before its submission")
                check((end - start) >= timedelta(hours=float(job["duration_h"])),
                      f"{p}/{j['job']}: runs shorter than its duration")
                if p == "fifo" and j["fallback"] == "false":   # a fallback may leave home (spatial)
                    check(j["region"] == job["home_region"], f"fifo/{j['job']}: not at home")
            # Per-region GPU-hours on stdout, where every plan is one window.
            if all(j["windows"] == "1" for j in js):
                load_checked.append(p)
                for z in REGIONS:
                    gpu_h = sum(int(trace[j["job"]]["gpus"]) * (t(j["end"]) - t(j["start"])).total_seconds() / 3600
                                for j in js if j["region"] == z)
                    check(close(gpu_h / 1e3, load[z][p], 0.051), f"{p}/{z}: {gpu_h} GPU-h vs table {load[z][p]} k")
        check("fifo" in load_checked and "spatial" in load_checked, f"region load checked for {load_checked} only")
        check(set(load) == set(REGIONS), f"region load rows {sorted(load)}")
        for z in REGIONS:
            check(list(load[z]) == POLICIES, f"region load columns for {z}: {list(load[z])}")
        for p in POLICIES:
            total = sum(float(trace[k]["duration_h"]) * int(trace[k]["gpus"]) for k in trace) / 1e3
            check(sum(load[z][p] for z in REGIONS) >= total - 0.2, f"{p}: region load below the trace's GPU-hours")

        # --- SVG: well-formed, one series per region, the chosen windows.
        root = ET.parse(d / "week.svg").getroot()
        check(root.tag == SVG_NS + "svg", f"svg root is {root.tag}")
        polylines = root.findall(f".//{SVG_NS}polyline")
        check(len(polylines) == len(REGIONS), f"{len(polylines)} series for {len(REGIONS)} regions")
        for pl in polylines:
            check(len(pl.get("points").split()) == 7 * 24, "a series without 168 hourly points")
        texts = [e.text or "" for e in root.iter(SVG_NS + "text")]
        for z in REGIONS:
            check(z in texts, f"no label for region {z}")
        check(any("spatio-temporal" in x and WEEK in x for x in texts), "title names the policy and the week")
        rects = {(float(r.get("x")), float(r.get("y")), float(r.get("width")))
                 for r in root.findall(f"{SVG_NS}rect") if r.get("fill") == "#2a9d8f"}
        week0, week1 = t(WEEK + "T00:00:00Z"), t(WEEK + "T00:00:00Z") + timedelta(days=7)
        want = 0
        for j in by_policy["spatio-temporal"]:
            a, b = max(t(j["start"]), week0), min(t(j["end"]), week1)
            if j["windows"] != "1" or b <= a:
                continue
            want += 1
            x0 = 120 + (a - week0).total_seconds() / 600
            w = max(0.5, (b - a).total_seconds() / 600)
            y = 40 + REGIONS.index(j["region"]) * 56 + 4
            check(any(abs(x - x0) < 0.06 and abs(yy - y) < 0.01 and abs(ww - w) < 0.11 for x, yy, ww in rects),
                  f"no window drawn for {j['job']} in {j['region']} at x={x0:.1f}")
        check(want > 0, "no spatio-temporal window in the drawn week")
        check(len(rects) >= want, f"{len(rects)} windows drawn, {want} expected at least")

        # --- the written trace read back gives the same totals.
        out2 = run(sim, COMMON + ["--trace", str(d / "trace.csv"), "--csv", str(d / "again.csv")])
        again = read_csv(d / "again.csv", CSV_HEADER)
        check(again == rows, "the --trace rerun's CSV differs from the first run's")
        tables = lambda o: [l for l in o.splitlines() if not l.startswith("#")]   # the header names the source
        check(tables(out2) == tables(out), "the --trace rerun's tables differ")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print(f"ok: {n} jobs, {len(POLICIES)} policies; region load checked for {', '.join(load_checked)}; "
          f"{want} drawn windows checked; CSV, jobs CSV, SVG and --trace rerun consistent")


if __name__ == "__main__":
    main()
