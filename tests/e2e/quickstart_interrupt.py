#!/usr/bin/env python3
"""Ctrl-C during the quickstart stops everything it started.

Runs the real scripts/quickstart.sh (prebuilt, a long run) in its own process
group, waits until the job's worker ranks are training, then sends SIGINT to
the whole group, as a terminal's Ctrl-C does. The script must exit non-zero
(130) within the grace period, and no process that inherited its environment
(controller, Prometheus, the CLI, every worker rank, whatever their process
group) may be left.

usage: quickstart_interrupt.py BUILD_DIR REPO_DIR
"""
import os, shutil, signal, subprocess, sys, tempfile, time

build, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
mark = "gs-interrupt-" + os.urandom(8).hex()


def marked():
    """PIDs whose environment carries this run's mark (not ours)."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            env = open(f"/proc/{d}/environ", "rb").read()
            if f"GS_INTERRUPT_MARK={mark}".encode() not in env.split(b"\0"):
                continue
            state = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            found[int(d)] = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            pass
    return found


def workers(procs):
    return {p: c for p, c in procs.items() if "greenshard-worker" in c and " prepare " not in c}


tmp = tempfile.mkdtemp(prefix="gs-qs-int-")
env = dict(os.environ, GS_INTERRUPT_MARK=mark, GREENSHARD_PREBUILT="1", GREENSHARD_BUILD_DIR=build,
           QUICKSTART_RUN_DIR=f"{tmp}/run", QUICKSTART_DATA_DIR=f"{tmp}/data", STEPS="100000",
           OMP_NUM_THREADS="1")
log = open(f"{tmp}/quickstart.log", "w+")
qs = subprocess.Popen(["bash", f"{repo}/scripts/quickstart.sh"], env=env, stdout=log, stderr=subprocess.STDOUT,
                      start_new_session=True)
rc = 1
try:
    end = time.time() + 300
    running = {}
    while time.time() < end and qs.poll() is None:
        running = workers(marked())
        if len(running) >= 2:
            break
        time.sleep(0.5)
    if len(running) < 2:
        raise SystemExit(f"FAIL: the job's 2 worker ranks never ran (quickstart exit {qs.poll()})")
    time.sleep(2)  # a few steps in
    print(f"2 ranks running: {sorted(running)}; sending SIGINT to the quickstart's process group")
    os.killpg(qs.pid, signal.SIGINT)
    try:
        code = qs.wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise SystemExit("FAIL: the quickstart did not exit within 90 s of Ctrl-C")
    left = {}
    end = time.time() + 30  # processes reparented to init may still be exiting
    while time.time() < end:
        left = marked()
        if not left:
            break
        time.sleep(0.5)
    print(f"quickstart exited {code}; left running: {left or 'nothing'}")
    if code == 0:
        raise SystemExit("FAIL: an interrupted quickstart exited 0")
    if left:
        raise SystemExit(f"FAIL: processes left after Ctrl-C: {left}")
    rc = 0
finally:
    if qs.poll() is None:
        os.killpg(qs.pid, signal.SIGKILL)
        qs.wait()
    for p in marked():
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if rc != 0:
        log.seek(0)
        print("--- quickstart output ---\n" + log.read()[-4000:])
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(rc)
