#!/usr/bin/env python3
"""Parses Dockerfiles for the essentials (no Docker engine is needed).

Checks, per file:
  - every FROM names an image pinned to a version tag (a tag with a digit;
    not `latest`, not a bare name, no build-arg substitution); FROM <stage>
    of an earlier stage is fine;
  - the final stage sets USER to a numeric, non-zero UID (Kubernetes can
    verify runAsNonRoot only for numeric users) and has an exec-form
    ENTRYPOINT (with --entrypoint: whose first word is that);
  - no ENV/ARG whose name looks like a secret (PASSWORD, TOKEN, API_KEY, ...)
    or whose value looks like one (private keys, long hex/base64, cloud keys);
  - no ADD from URLs, no `curl|sh`, no COPY of keys or .env files;
  - apt-get install uses --no-install-recommends and the same RUN removes
    /var/lib/apt/lists;
  - --require REGEX: the text must match (e.g. -DGREENSHARD_CUDA=ON);
  - --final-forbid REGEX: the final stage must not match (e.g. libtorch).
With --dockerignore FILE, that file must exclude .git, build trees and .tools.

Usage: check_dockerfiles.py [--entrypoint NAME] [--require RE]... [--final-forbid RE]...
                            [--dockerignore FILE] [--expect-reject RE]... DOCKERFILE
"""
import argparse
import json
import re
import sys
from pathlib import Path

SECRET_NAME = re.compile(r"(PASSW(OR)?D|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|CREDENTIAL|ACCESS_?KEY|AUTH)", re.I)
SECRET_VALUE = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), "a GitHub token"),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"^[A-Fa-f0-9]{32,}$"), "a long hex string"),
    (re.compile(r"^[A-Za-z0-9+/]{40,}={0,2}$"), "a long base64 string"),
]


def instructions(text: str):
    """(line number, INSTRUCTION, arguments) with continuations joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # comment inside a continued instruction
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        m = re.match(r"\s*([A-Za-z]+)\s*(.*)", buf, re.S)
        if m:
            out.append((start, m.group(1).upper(), m.group(2).strip()))
        buf = ""
    if buf:
        out.append((start, "INCOMPLETE", buf))
    return out


def env_pairs(args: str):
    """ENV/ARG arguments -> [(name, value)] (key=value pairs, or the legacy `ENV key value`)."""
    pairs = re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\'[^\']*\'|\S*)', args)
    if pairs:
        return [(k, v.strip("\"'")) for k, v in pairs]
    parts = args.split(None, 1)
    return [(parts[0], parts[1] if len(parts) > 1 else "")] if parts else []


def check(path: Path, entrypoint: str, requires, final_forbid):
    problems = []
    text = path.read_text(encoding="utf-8")
    ins = instructions(text)
    name = path.name
    stages = []  # [(alias, [instructions])]
    for ln, op, args in ins:
        if op == "INCOMPLETE":
            problems.append(f"{name}:{ln}: unterminated line continuation")
            continue
        if op == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", args, re.I)
            if not m:
                problems.append(f"{name}:{ln}: cannot parse FROM {args!r}")
                stages.append((None, []))
                continue
            image, alias = m.group(1), m.group(2)
            known = {a.lower() for a, _ in stages if a}
            if image.lower() not in known and image != "scratch":
                ref = image.split("@")[0]
                last = ref.rsplit("/", 1)[-1]
                tag = last.split(":", 1)[1] if ":" in last else ""
                if "$" in image:
                    problems.append(f"{name}:{ln}: FROM {image}: base image from a build argument (not pinned)")
                elif not tag:
                    problems.append(f"{name}:{ln}: FROM {image}: no tag (pin a version tag)")
                elif tag == "latest":
                    problems.append(f"{name}:{ln}: FROM {image}: the latest tag is not a pin")
                elif not re.search(r"[0-9]", tag):
                    problems.append(f"{name}:{ln}: FROM {image}: tag {tag!r} is not a version")
            stages.append((alias, []))
            continue
        if not stages:
            if op != "ARG":
                problems.append(f"{name}:{ln}: {op} before the first FROM")
            continue
        stages[-1][1].append((ln, op, args))

    if not stages:
        return problems + [f"{name}: no FROM"]

    for _, body in stages:
        for ln, op, args in body:
            if op in ("ENV", "ARG"):
                for k, v in env_pairs(args):
                    if SECRET_NAME.search(k):
                        problems.append(f"{name}:{ln}: {op} {k}: a secret-looking name (pass secrets at run time)")
                    for rx, what in SECRET_VALUE:
                        if v and rx.search(v):
                            problems.append(f"{name}:{ln}: {op} {k}: the value looks like {what}")
            if op == "ADD" and re.search(r"\bhttps?://", args):
                problems.append(f"{name}:{ln}: ADD from a URL (unpinned download)")
            if op == "RUN":
                if re.search(r"\b(curl|wget)\b[^|;&]*\|\s*(ba|z)?sh\b", args):
                    problems.append(f"{name}:{ln}: RUN pipes a download into a shell")
                if re.search(r"apt-get\s+(-\S+\s+)*install", args):
                    if "--no-install-recommends" not in args:
                        problems.append(f"{name}:{ln}: apt-get install without --no-install-recommends")
                    if "/var/lib/apt/lists" not in args:
                        problems.append(f"{name}:{ln}: apt-get install without removing /var/lib/apt/lists")
            if op in ("COPY", "ADD") and re.search(r"(\.env\b|id_rsa|\.pem\b|\.key\b|\.npmrc|\.netrc)", args):
                problems.append(f"{name}:{ln}: {op} copies a secret-looking file: {args}")

    final = stages[-1][1]
    users = [(ln, a) for ln, op, a in final if op == "USER"]
    if not users:
        problems.append(f"{name}: the final stage sets no USER (it would run as root)")
    else:
        ln, user = users[-1]
        uid = user.split(":")[0]
        if uid in ("root", "0") or user.startswith("0:"):
            problems.append(f"{name}:{ln}: USER {user} is root")
        elif not uid.isdigit():
            problems.append(f"{name}:{ln}: USER {user}: use a numeric UID so runAsNonRoot can be verified")
    eps = [(ln, a) for ln, op, a in final if op == "ENTRYPOINT"]
    if not eps:
        problems.append(f"{name}: the final stage has no ENTRYPOINT")
    else:
        ln, ep = eps[-1]
        try:
            argv = json.loads(ep)
            if not (isinstance(argv, list) and argv and all(isinstance(x, str) for x in argv)):
                raise ValueError
        except ValueError:
            problems.append(f"{name}:{ln}: ENTRYPOINT {ep}: use the exec form [\"...\"]")
        else:
            if entrypoint and argv[0] != entrypoint:
                problems.append(f"{name}:{ln}: ENTRYPOINT runs {argv[0]!r}, expected {entrypoint!r}")
    for rx in requires:
        if not re.search(rx, text):
            problems.append(f"{name}: does not match required /{rx}/")
    final_text = "\n".join(f"{op} {a}" for _, op, a in final)
    for rx in final_forbid:
        if re.search(rx, final_text):
            problems.append(f"{name}: the final stage matches forbidden /{rx}/")
    return problems


def check_dockerignore(path: Path):
    if not path.exists():
        return [f"{path}: missing"]
    lines = {l.strip().rstrip("/") for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")}
    return [f"{path}: does not exclude {want}" for want in (".git", "build", ".tools") if want not in lines]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entrypoint", default="")
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("--final-forbid", action="append", default=[])
    ap.add_argument("--dockerignore", type=Path)
    ap.add_argument("--expect-reject", action="append", default=[])
    ap.add_argument("dockerfile", type=Path)
    a = ap.parse_args()
    problems = check(a.dockerfile, a.entrypoint, a.require, a.final_forbid)
    if a.dockerignore:
        problems += check_dockerignore(a.dockerignore)
    if a.expect_reject:
        for p in problems:
            print(f"(expected) {p}")
        missing = [r for r in a.expect_reject if not any(re.search(r, p) for p in problems)]
        for r in missing:
            print(f"check_dockerfiles: no problem matches /{r}/", file=sys.stderr)
        return 1 if (missing or not problems) else 0
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_dockerfiles: {a.dockerfile.name} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
