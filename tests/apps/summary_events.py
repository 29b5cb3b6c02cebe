#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with the protobuf library and checks its histograms
against the variables of a checkpoint taken at the same step.

    summary_events.py LOGDIR CHECKPOINT

The messages are declared here from TensorFlow's event.proto and summary.proto (the fields Cohort
writes) and parsed by google.protobuf, a decoder that shares no code with Cohort's encoder. Every
event must parse; the last histogram write must hold one histogram per variable of CHECKPOINT
(the trainable ones and the layer state), each exactly what numpy makes of the checkpoint's
values over TensorFlow's default buckets (edges grown here); the scalars must include the loss.
Exits 0 when all holds, 1 with a message per fault otherwise.
"""

import glob
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core", "io"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from checkpoint_reader import load  # noqa: E402
from proto_messages import Declarations  # noqa: E402


def messages():
    """Event, declared as TensorFlow's protos declare the fields Cohort writes."""
    d = Declarations("tensorflow")
    d.message("HistogramProto", [("min", 1, "double", False), ("max", 2, "double", False),
                                 ("num", 3, "double", False), ("sum", 4, "double", False),
                                 ("sum_squares", 5, "double", False),
                                 ("bucket_limit", 6, "double", True), ("bucket", 7, "double", True)])
    d.message("Value", [("tag", 1, "string", False), ("simple_value", 2, "float", False),
                        ("histo", 5, "HistogramProto", False)])
    d.message("Summary", [("value", 1, "Value", True)])
    d.message("SessionLog", [("status", 1, "int32", False)])
    d.message("Event", [("wall_time", 1, "double", False), ("step", 2, "int64", False),
                        ("file_version", 3, "string", False), ("summary", 5, "Summary", False),
                        ("session_log", 7, "SessionLog", False)])
    return d.classes("Event")[0]


def events(path, event_class):
    """The Events of one file (TFRecord framing; the checksums are the C++ tests' to check)."""
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        (length,) = struct.unpack_from("<Q", blob, at)
        event = event_class()
        event.ParseFromString(blob[at + 12:at + 12 + length])
        yield event
        at += 12 + length + 4


def default_edges():
    """TensorFlow's default bucket edges, grown by multiplication as TensorFlow grows them."""
    positive = []
    v = 1e-12
    while v < 1e20:
        positive.append(v)
        v *= 1.1
    positive.append(sys.float_info.max)
    return np.array([-x for x in reversed(positive)] + [0.0] + positive)


def expected_histogram(values, edges):
    """(limits, counts) as TensorFlow writes them: runs of empty buckets merged into one."""
    counts = np.bincount(np.searchsorted(edges, values, side="right"), minlength=len(edges))
    limits, buckets, i = [], [], 0
    while i < len(counts):
        j = i
        if counts[i] == 0:
            while j + 1 < len(counts) and counts[j + 1] == 0:
                j += 1
        limits.append(edges[j])
        buckets.append(float(counts[j]))
        i = j + 1
    return limits, buckets


def main(logdir, checkpoint):
    event_class = messages()
    histograms, scalars = {}, set()
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    if not files:
        return [f"no event file in {logdir}"]
    for path in files:
        for event in events(path, event_class):
            for value in event.summary.value:
                if value.HasField("histo"):
                    histograms.setdefault(event.step, {})[value.tag] = value.histo
                else:
                    scalars.add(value.tag)
    errors = []
    if "loss" not in scalars:
        errors.append(f"no loss scalar among {sorted(scalars)}")
    if not histograms:
        return errors + ["no histograms"]
    tensors, metadata = load(checkpoint)
    step = max(histograms)
    if str(step) != str(metadata.get("global_step")):
        errors.append(f"last histograms at step {step}, checkpoint at {metadata.get('global_step')}")
    written = histograms[step]
    variables = {name: t for name, t in tensors.items() if name in written}
    missing = sorted(name for name in tensors if "/" in name and name not in written
                     and not name.startswith("optimizer"))
    if missing:
        errors.append(f"step {step}: no histogram of {missing}")
    if len(variables) != len(written):
        errors.append(f"histograms of {sorted(set(written) - set(variables))}, not in the checkpoint")
    edges = default_edges()
    for name, tensor in variables.items():
        h = written[name]
        v = tensor.astype(np.float64).ravel()
        limits, buckets = expected_histogram(v, edges)
        checks = [("num", h.num, float(v.size)), ("min", h.min, v.min()), ("max", h.max, v.max()),
                  ("bucket_limit", list(h.bucket_limit), limits), ("bucket", list(h.bucket), buckets)]
        for what, got, want in checks:
            if got != want:
                errors.append(f"{name}: {what} {got if what[0] != 'b' else len(got)} != "
                              f"{want if what[0] != 'b' else len(want)} expected")
        for what, got, want in (("sum", h.sum, v.sum()), ("sum_squares", h.sum_squares, (v * v).sum())):
            if abs(got - want) > 1e-9 * max(1.0, abs(want)):
                errors.append(f"{name}: {what} {got} != {want} expected")
    print(f"{len(files)} event file(s); histograms at steps {sorted(histograms)}; "
          f"{len(variables)} variables checked at step {step} against {os.path.basename(checkpoint)}")
    return errors


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    faults = main(sys.argv[1], sys.argv[2])
    for fault in faults:
        print("FAIL:", fault)
    sys.exit(1 if faults else 0)
