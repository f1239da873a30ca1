#!/usr/bin/env python3
"""greenshard-sim simulates the policy the controller runs: with no flags,
its placement settings (look-ahead, re-planning period, capacity pricing,
windows) and its forecaster are the controller's defaults.

Starts the real greenshard-controller (a temporary data dir, port 0, a
`source: file` carbon source that names no forecaster) and reads the
settings it logs at start; runs greenshard-sim on a small trace and reads
the ones it prints; both come from SchedulerOptions and CarbonSourceConfig.
A flag changes the simulator's line (so the comparison can fail), and the
controller's flags change its line the same way.

usage: sim_defaults_test.py PATH/TO/greenshard-sim PATH/TO/greenshard-controller
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def fail(msg):
    sys.exit("sim_defaults_test: " + msg)


def controller_settings(controller, d, extra):
    """The 'placement:' and 'carbon source' lines the controller logs at start."""
    log = d / "controller.log"
    p = subprocess.Popen([controller, "--tokens", str(d / "tokens"), "--data-dir", str(d / "data"),
                          "--carbon-source", str(d / "carbon.yaml"), "--host", "127.0.0.1", "--port", "0",
                          "--port-file", str(d / "port")] + extra,
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = log.read_text()
            placement = re.search(r"^greenshard-controller: placement: (.*)$", text, re.M)
            source = re.search(r"^greenshard-controller: carbon source file \(forecast (\S+)\)$", text, re.M)
            if placement and source:
                return placement.group(1), source.group(1)
            if p.poll() is not None:
                fail(f"the controller exited {p.returncode} before logging its settings:\n{text}")
            time.sleep(0.05)
        fail("the controller logged no settings within 60 s:\n" + log.read_text())
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)


def sim_settings(sim, extra):
    """The '# placement:' line and the forecaster greenshard-sim prints."""
    out = subprocess.run([sim, "--regions", "GB,DE", "--capacity", "256", "--jobs-per-workday", "2",
                          "--from", "2023-03-06", "--to", "2023-03-10", "--policies", "fifo"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if out.returncode != 0:
        fail(f"greenshard-sim exited {out.returncode}:\n{out.stderr}")
    placement = re.search(r"^# placement: (.*)$", out.stdout, re.M)
    forecast = re.search(r"^# greenshard-sim: .*, forecast (\S+)$", out.stdout, re.M)
    if not placement or not forecast:
        fail("greenshard-sim printed no settings:\n" + out.stdout)
    return placement.group(1), forecast.group(1)


def main():
    sim, controller = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "data").mkdir()
        (d / "tokens").write_text("t0ken-for-the-defaults-test,team-a,user\n")
        (d / "carbon.yaml").write_text("source: file\n")
        ctl = controller_settings(controller, d, [])
        got = sim_settings(sim, [])
        if got != ctl:
            fail(f"greenshard-sim's defaults {got} differ from the controller's {ctl}")
        if "look-ahead" not in ctl[0] or "re-plan every" not in ctl[0]:
            fail(f"the settings line names no look-ahead or re-planning period: {ctl[0]}")
        # The comparison sees a difference: one flag on either side.
        changed = sim_settings(sim, ["--lookahead-h", "72", "--replan-every-h", "2", "--replan", "full"])
        if changed[0] == ctl[0]:
            fail("--lookahead-h 72 --replan-every-h 2 --replan full left greenshard-sim's settings line unchanged")
        ctl_changed = controller_settings(controller, d, ["--lookahead-hours", "72", "--replan-seconds", "7200",
                                                          "--full-replan"])
        if ctl_changed != changed:
            fail(f"the same settings print differently: controller {ctl_changed}, greenshard-sim {changed}")
    print("sim_defaults_test: ok:", ctl)


if __name__ == "__main__":
    main()
