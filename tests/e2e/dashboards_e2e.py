#!/usr/bin/env python3
"""Every PromQL expression of the Grafana dashboards, run against a real
Prometheus (Debian) scraping a real greenshard-controller and the real
workers of a running 2-rank job (local executor). Each expression must parse,
and return data, except that these must parse but may return nothing:
  - GPU series (greenshard_gpu_*): this machine has no GPU, and the worker
    never invents them (bench/gpu/run.sh covers NVML on a GPU);
  - `offset 1d`: a fresh Prometheus has no data from yesterday.
Every templating variable's `label_values(METRIC, LABEL)` query runs too
(as Grafana runs it: the label's values among METRIC's series) and must
return at least one value.

usage: dashboards_e2e.py BUILD_DIR REPO_DIR
"""
import json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.parse, urllib.request

build, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
worker = f"{build}/worker/greenshard-worker"
controller = f"{build}/controller/greenshard-controller"
dashboards = [f"{repo}/charts/greenshard/dashboards/{n}.json" for n in ("training", "carbon")]
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(args, log):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    procs.append(p)
    return p


def stop_all():
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def http(url, body=None, token=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def wait_for(cond, limit, what):
    end = time.time() + limit
    while time.time() < end:
        try:
            if cond():
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit(f"FAIL: timed out waiting for {what}")


def expressions(path):
    out = []
    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
    walk(json.load(open(path))["panels"])
    return out


def variables(path):
    out = []
    for v in json.load(open(path)).get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        out.append((v.get("name", "?"), q or ""))
    return out


def concrete(expr):
    # Grafana's variables as Grafana would expand them for "All".
    e = expr.replace("$__rate_interval", "30s").replace("$__interval", "2s").replace("$__range", "5m")
    return re.sub(r"\$\{?(job|rank|region)\}?", ".*", e)


TMP = tempfile.mkdtemp(prefix="gs-dash-")


def main():
    tmp = TMP
    data = f"{tmp}/data"
    subprocess.run([worker, "prepare", "--input", "/usr/share/common-licenses/GPL-3", "--out", data], check=True,
                   stdout=subprocess.DEVNULL)
    token = "dash-" + os.urandom(8).hex()
    open(f"{tmp}/tokens", "w").write(f"{token},e2e,user\n")
    open(f"{tmp}/regions.yaml", "w").write(
        "regions:\n  - {name: local-de, zone: DE, nodes: 1, pue: 1.2}\n  - {name: local-gb, zone: GB, nodes: 1, pue: 1.2}\n")
    # A quota for the tenant, so that the quota and preemption panels have series.
    open(f"{tmp}/quotas.yaml", "w").write("tenants:\n  e2e: {local-de: {nodes: 1}, local-gb: {nodes: 1, gpus: 0}}\n")
    cport, pport = free_port(), free_port()
    start([controller, "--tokens", f"{tmp}/tokens", "--regions", f"{tmp}/regions.yaml", "--quotas", f"{tmp}/quotas.yaml",
           "--data-dir", f"{tmp}/ctl",
           "--host", "127.0.0.1", "--port", str(cport), "--worker", worker, "--cycle-ms", "200"], f"{tmp}/controller.log")
    url = f"http://127.0.0.1:{cport}"
    wait_for(lambda: urllib.request.urlopen(url + "/healthz", timeout=2).status == 200, 60, "the controller")
    open(f"{tmp}/prometheus.yml", "w").write(f"""global: {{scrape_interval: 2s, evaluation_interval: 2s}}
scrape_configs:
  - job_name: greenshard-controller
    static_configs: [{{targets: ['127.0.0.1:{cport}']}}]
  - job_name: greenshard-worker
    honor_labels: true
    file_sd_configs: [{{files: ['{tmp}/ctl/prometheus/local-jobs.json'], refresh_interval: 2s}}]
""")
    start(["prometheus", f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
           f"--web.listen-address=127.0.0.1:{pport}"], f"{tmp}/prometheus.log")
    prom = f"http://127.0.0.1:{pport}"
    job = http(url + "/v1/jobs", {
        "name": "dash", "nodes": 1, "procs_per_node": 2, "regions": ["local-de", "local-gb"],
        "estimate": {"duration_s": 600, "power_watts": 65},
        "worker": {"model": {"layers": 2, "heads": 2, "embd": 64, "context": 32},
                   "data": {"train": f"{data}/train.bin", "val": f"{data}/val.bin"},
                   "schedule": {"steps": 100000, "batch_size": 4, "eval_interval": 5, "eval_batches": 1},
                   "log": {"every": 1}}}, token)
    jid = job["id"]
    print(f"job {jid} submitted")

    def query(e):
        q = urllib.parse.urlencode({"query": e})
        return http(f"{prom}/api/v1/query?{q}")

    wait_for(lambda: len(query('greenshard_training_steps_total')["data"]["result"]) == 2, 180,
             "both ranks' metrics in Prometheus")
    failures, checked, exempt = [], 0, 0
    for path in dashboards:
        for title, expr in expressions(path):
            name = os.path.basename(path)
            e = concrete(expr)
            try:
                query(e)  # parses (HTTP 400 otherwise)
            except urllib.error.HTTPError as err:
                failures.append(f"{name}: {title}: does not parse: {e}: {err.read()[:200]}")
                continue
            if "greenshard_gpu_" in expr or "offset 1d" in expr:
                exempt += 1
                print(f"exempt  {name}: {title}: parses, data not required: {expr}")
                continue
            got = []
            end = time.time() + 90
            while time.time() < end:
                got = query(e)["data"]["result"]
                if got:
                    break
                time.sleep(1)
            checked += 1
            if not got:
                failures.append(f"{name}: {title}: no data: {e}")
            else:
                print(f"ok      {name}: {title}: {len(got)} series")
    for path in dashboards:
        name = os.path.basename(path)
        for var, q in variables(path):
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
            if not m:
                failures.append(f"{name}: variable {var}: not a label_values(METRIC, LABEL) query: {q}")
                continue
            selector, label = concrete(m.group(1)), m.group(2)
            qs = urllib.parse.urlencode({"match[]": selector})
            values = []
            end = time.time() + 60
            while time.time() < end:
                values = http(f"{prom}/api/v1/label/{label}/values?{qs}")["data"]
                if values:
                    break
                time.sleep(1)
            checked += 1
            if not values:
                failures.append(f"{name}: variable {var}: no values: {q}")
            else:
                print(f"ok      {name}: variable {var}: {values}")
    print(f"{checked} expressions and variables returned data, {exempt} exempt (parsed), {len(failures)} failed")
    for f in failures:
        print("FAIL", f)
    return 1 if failures or checked == 0 else 0


try:
    rc = main()
finally:
    stop_all()
    shutil.rmtree(TMP, ignore_errors=True)
sys.exit(rc)
