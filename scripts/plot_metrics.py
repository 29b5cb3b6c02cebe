#!/usr/bin/python3
"""Render the loss and accuracy curves of a Cohort run to a PNG.

Usage: scripts/plot_metrics.py LOGDIR [-o OUT.png]   (installed as cohort-plot-metrics)

Reads LOGDIR/metrics.csv (columns step,wall_time,tag,value, as written by cohort::SummaryWriter)
and draws two panels against the step: every tag whose name contains "loss", and every tag whose
name contains "acc" (accuracy). A run restarted from a checkpoint goes back in steps: from that
step on, only its rows count (as TensorBoard drops the earlier run's points after a session
start), so a run that died after its last checkpoint leaves nothing past it.
Writes LOGDIR/metrics.png unless -o says otherwise. Needs matplotlib (Debian: python3-matplotlib);
uses the Agg backend, so no display is needed.
"""

import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402  (after the backend is chosen)
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (("loss", "loss"), ("accuracy", "acc"))


def read_metrics(path):
    """Returns {tag: [(step, value), ...]} sorted by step: per tag, a row whose step is not past
    the one before it starts over from there (a restarted run), dropping the rows at or past it."""
    series = {}
    last = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"step", "tag", "value"} - set(reader.fieldnames or ())
        if missing:
            sys.exit(f"plot_metrics: {path}: missing column(s) {', '.join(sorted(missing))}")
        for line, row in enumerate(reader, start=2):
            try:
                step, value = int(row["step"]), float(row["value"])
            except (TypeError, ValueError):
                sys.exit(f"plot_metrics: {path}:{line}: bad step or value: {row}")
            tag = row["tag"]
            points = series.setdefault(tag, {})
            if tag in last and step <= last[tag]:
                for old in [s for s in points if s >= step]:
                    del points[old]
            points[step] = value
            last[tag] = step
    return {tag: sorted(points.items()) for tag, points in series.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir", help="directory holding metrics.csv")
    parser.add_argument("-o", "--output", help="PNG to write (default LOGDIR/metrics.png)")
    args = parser.parse_args()

    csv_path = os.path.join(args.logdir, "metrics.csv")
    if not os.path.isfile(csv_path):
        sys.exit(f"plot_metrics: {csv_path}: no such file")
    output = args.output or os.path.join(args.logdir, "metrics.png")
    series = read_metrics(csv_path)

    panels = []
    for title, key in PANELS:
        tags = sorted(t for t in series if key in t.lower())
        if tags:
            panels.append((title, tags))
    if not panels:
        sys.exit(f"plot_metrics: {csv_path}: no loss or accuracy tags (found: {', '.join(sorted(series)) or 'none'})")

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    summary = []
    for ax, (title, tags) in zip(axes[0], panels):
        for tag in tags:
            steps = [s for s, _ in series[tag]]
            values = [v for _, v in series[tag]]
            # A handful of points (an eval every N steps) reads better with markers.
            ax.plot(steps, values, label=tag, marker="o" if len(steps) <= 20 else None)
            summary.append(f"{tag} ({len(steps)} points)")
        finite = [v for t in tags for _, v in series[t] if math.isfinite(v)]
        if title == "loss" and finite and min(finite) > 0 and max(finite) / min(finite) > 100:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(os.path.basename(os.path.normpath(args.logdir)))
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)

    # Read the file back, so a run that reports success has written a PNG that decodes.
    height, width = matplotlib.image.imread(output).shape[:2]
    print(f"plot_metrics: wrote {output} ({width}x{height} px): {', '.join(summary)}")


if __name__ == "__main__":
    main()
