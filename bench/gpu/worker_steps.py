"""The worker's JSON step lines (log.format json), for bench/gpu/worker_run.sh.

  worker_steps.py last LOG     -> "STEP LOSS" of the last step line ("0 nan": none)
  worker_steps.py first LOG    -> "STEP LOSS" of the first step line
  worker_steps.py resumed LOG SUMMARY SAVED STEPS FIRST1 LAST1
                               -> "OK MEDIAN_MFU": OK is 1 when the resumed run
                                  (LOG, SUMMARY) went on from step SAVED, with
                                  run 1's loss (FIRST1 -> LAST1), to STEPS; each
                                  failure is printed on stderr. MEDIAN_MFU: the
                                  median logged MFU after its first line.
"""
import json
import statistics
import sys


def step_lines(path):
    out = []
    for line in open(path, errors="replace"):
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if "step" in j and "loss" in j:
                out.append(j)
    return out


def resumed(log, summary, saved, total, first1, last1):
    lines, why = step_lines(log), []
    try:
        s = json.load(open(summary))
    except (OSError, ValueError) as e:
        s = {}
        why.append(f"no summary: {e}")
    if s.get("state") != "succeeded" or s.get("steps") != total:
        why.append(f"the resumed run ended {s.get('state')} at step {s.get('steps')}, not succeeded at {total}")
    if s.get("resumed_from_step") != saved or saved <= 0:
        why.append(f"it resumed from step {s.get('resumed_from_step')}, not the step saved at SIGTERM ({saved})")
    if not lines or lines[0]["step"] <= saved:
        why.append(f"its first logged step {lines[0]['step'] if lines else None} is not after {saved}")
    else:
        # The loss goes on from where it was: near run 1's last, far below its first.
        l0 = lines[0]["loss"]
        if not (abs(l0 - last1) <= max(0.5, 0.15 * last1) and l0 < first1 - 0.5):
            why.append(f"its first loss {l0:.3f} does not continue run 1's ({first1:.3f} -> {last1:.3f})")
    for w in why:
        print("worker_run: FAIL:", w, file=sys.stderr)
    mfus = [j["mfu"] for j in lines[1:] if j.get("mfu", 0) > 0]
    return f'{0 if why else 1} {statistics.median(mfus) if mfus else float("nan")}'


def main(argv):
    cmd, a = argv[1], argv[2:]
    if cmd in ("last", "first"):
        lines = step_lines(a[0])
        j = (lines[-1] if cmd == "last" else lines[0]) if lines else None
        print(f'{j["step"]} {j["loss"]}' if j else "0 nan")
    elif cmd == "resumed":
        print(resumed(a[0], a[1], int(a[2]), int(a[3]), float(a[4]), float(a[5])))
    else:
        sys.exit(f"worker_steps.py: unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv)
