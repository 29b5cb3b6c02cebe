#!/usr/bin/python3
"""Compares the variables of two Cohort checkpoints.

    compare_checkpoints.py A B [--rtol 1e-6]

Exits 0 when both hold the same variables (optimizer slots included) with values equal to the
relative tolerance, 1 with one line per difference otherwise.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "io"))
from checkpoint_reader import load  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-6)
    args = parser.parse_args()
    a, meta_a = load(args.a)
    b, meta_b = load(args.b)
    problems = []
    if set(a) != set(b):
        problems.append(f"different tensors: {sorted(set(a) ^ set(b))}")
    if meta_a.get("global_step") != meta_b.get("global_step"):
        problems.append(f"global steps differ: {meta_a.get('global_step')} vs {meta_b.get('global_step')}")
    worst = 0.0
    for name in sorted(set(a) & set(b)):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape:
            problems.append(f"{name}: shapes {x.shape} vs {y.shape}")
            continue
        scale = np.maximum(np.abs(y), 1e-3)
        diff = float(np.max(np.abs(x - y) / scale)) if x.size else 0.0
        worst = max(worst, diff)
        if diff > args.rtol:
            problems.append(f"{name}: largest relative difference {diff:.3g} > {args.rtol:g}")
    for p in problems:
        print(p)
    print(f"compared {len(a)} tensors at global step {meta_a.get('global_step')}: "
          f"largest relative difference {worst:.3g}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
