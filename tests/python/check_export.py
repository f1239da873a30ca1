#!/usr/bin/env python3
"""Checks a GreenShard torch_save export against logits computed in C++.

    check_export.py --export FILE [--card FILE.json] --tokens TOKENS.json
                    --logits LOGITS.bin [--tolerance 1e-5]

TOKENS.json: {"shape": [B, T], "tokens": [...]} (row-major token ids).
LOGITS.bin: the C++ logits (B, T, vocab), float32 little-endian, row-major.
Loads the export with torch.load into reference_gpt.GPT (shaped by the
card), computes the logits of the tokens, prints the largest absolute
difference and exits 1 when it exceeds the tolerance (or anything does
not match).
"""
import argparse
import json
import os
import sys

import torch

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_gpt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--export", required=True)
    ap.add_argument("--card")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--logits", required=True)
    ap.add_argument("--tolerance", type=float, default=1e-5)
    a = ap.parse_args()

    card = reference_gpt.load_card(a.card or a.export + ".json")
    model = reference_gpt.load_export(a.export, card)
    with open(a.tokens) as f:
        tok = json.load(f)
    B, T = tok["shape"]
    idx = torch.tensor(tok["tokens"], dtype=torch.long).view(B, T)
    V = card["model"]["vocab"]
    with open(a.logits, "rb") as f:
        raw = f.read()
    if len(raw) != B * T * V * 4:
        sys.exit(f"{a.logits}: {len(raw)} bytes, expected {B}x{T}x{V} float32")
    want = torch.frombuffer(bytearray(raw), dtype=torch.float32).view(B, T, V)
    with torch.no_grad():
        got = model(idx)
    if tuple(got.shape) != (B, T, V):
        sys.exit(f"reference logits have shape {tuple(got.shape)}, expected {(B, T, V)}")
    diff = (got.double() - want.double()).abs().max().item()
    scale = want.abs().max().item()
    print(f"torch {torch.__version__}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"logits {B}x{T}x{V} (max |logit| {scale:.4g}), max |dlogit| = {diff:.3e} (tolerance {a.tolerance:g})")
    if not diff <= a.tolerance:
        sys.exit(f"FAIL: max |dlogit| {diff:.3e} > {a.tolerance:g}")


if __name__ == "__main__":
    main()
