#!/usr/bin/env python3
"""Cohort's cost model for many nodes (docs/SCALING.md): predicted step time and images/s of the
ps modes (sync, async; P ps tasks) and of ring allreduce, for N worker nodes at given link speeds.

    scripts/scaling_model.py                       # the tables of docs/SCALING.md
    scripts/scaling_model.py --check               # the one-node check against measurements
    scripts/scaling_model.py --model cnn --compute_ms 60 --gbps 100 --workers 4,16,64
    scripts/scaling_model.py --model cnn --gbps 25 --compression bf16   # --compression=bf16

Inputs (measured on one node; see docs/SCALING.md): per-worker compute time of one step at batch
64 (forward, backward, update), the model's parameter bytes, and the rate at which one ps task
answers requests when its windows are served by messages (TCP). The model assumes one worker per
node, ps tasks on nodes of their own, full-duplex links of B bytes/s, a per-message latency alpha,
and no overlap of communication with compute (gradients leave after the backward pass).
"""
import argparse

# Measured here (docs/SCALING.md, "Inputs"): one thread, batch 64, x86-64-v3 kernels.
MODELS = {  # name: (parameters, compute ms per step)
    "mlp": (235_146, 1.42),
    "cnn": (3_274_634, 98.9),
    "resnet": (175_530, 185.5),
}
BATCH = 64
ALPHA = 20e-6  # seconds per message: TCP over Ethernet, both ends' software included
# --compression=bf16: the conversions (rounding with error feedback, and back) cost about this
# much per parameter and step (docs/BENCHMARKS.md), added to the compute.
BF16_SECONDS_PER_VALUE = 0.56e-9
# Sync mode on one-sided memory: the chief's update goes in pieces of this many bytes.
PIECE_BYTES = 256 * 1024


def allreduce_time(s, w, b, alpha, g=1.0):
    """Ring allreduce of s bytes over w workers: 2(w-1) steps of s/w bytes each (g s with
    compression: g = 0.5 for bfloat16)."""
    if w == 1:
        return 0.0
    return 2 * (w - 1) * (alpha + g * s / (w * b))


def sync_time(s, w, p, b, alpha, serve, g=1.0):
    """Sync mode: every worker but the chief pushes its gradients (g s bytes, split over the p
    ps tasks); the chief takes the sum (g s, read and cleared in one transfer), adds its own
    gradient and writes the parameters (s, float32 always); every worker but the chief pulls s.
    A ps link carries (w-1)/p of the pushes and pulls; a ps task that serves by messages moves
    at most `serve` bytes/s, and there these follow one another. Where the ps memory is
    one-sided, everything goes in pieces of PIECE_BYTES: the others push piece by piece (two
    round trips each: the piece and its count), the chief takes each piece as soon as all hold
    it, updates and writes it (three round trips each), the others pull each piece as it is
    written, and one of them zeroes the sums' piece after its pull (s more bytes into the ps
    tasks, s more through its link). The stages overlap: a step lasts as long as the slowest of
    the pushes, the chief's path, the clearing worker's and the ps links in either direction
    (in: pushes, the write, the zeroes; out: the take, the pulls), plus one piece's way through."""
    ps_rate = min(b, serve)
    others = w - 1
    push = max(g * s / b, others * g * s / (p * ps_rate)) if others else 0.0
    chief = (1 + g) * max(s / b, s / (p * ps_rate))
    pull = max(s / b, others * s / (p * ps_rate)) if others else 0.0
    if serve != float("inf"):
        return push + chief + pull + 6 * alpha
    if not others:
        return chief + 3 * alpha
    pieces = -(-s // PIECE_BYTES)
    push += 2 * pieces * alpha
    chief += 3 * pieces * alpha
    clearer = 2 * s / b + 2 * pieces * alpha
    links = max(others * g + 2, g + others) * s / (p * ps_rate)
    return max(push, chief, clearer, links) + 2 * PIECE_BYTES / b + 3 * alpha


def async_rate(s, w, p, b, alpha, serve, compute, g=1.0):
    """Async mode: steps per second. Each worker pushes g s and pulls s per step, no barrier;
    the p ps tasks together send at most p * rate / s pulls per second (the pushes, g <= 1,
    come in on the other direction of the same full-duplex links)."""
    ps_rate = min(b, serve)
    per_worker = 1.0 / (compute + (1 + g) * s / b + 2 * alpha)
    return min(w * per_worker, p * ps_rate / s)


def predict(model, w, p, gbps, serve, alpha, compute_ms=None, compression="none"):
    params, ms = MODELS[model]
    compute = (compute_ms if compute_ms is not None else ms) / 1e3
    one = BATCH / compute
    g = 0.5 if compression == "bf16" else 1.0
    if compression == "bf16":
        compute += params * BF16_SECONDS_PER_VALUE
    s = 4.0 * params
    b = gbps * 1e9 / 8
    ar = w * BATCH / (compute + allreduce_time(s, w, b, alpha, g))
    sy = w * BATCH / (compute + sync_time(s, w, p, b, alpha, serve, g))
    asy = BATCH * async_rate(s, w, p, b, alpha, serve, compute, g)
    return one, ar, sy, asy


def tables(args):
    for model in args.model.split(","):
        params, ms = MODELS[model]
        print(f"\n{model}: {params:,} parameters ({4 * params / 1e6:.2f} MB), "
              f"{args.compute_ms or ms} ms of compute per step at batch {BATCH}; "
              f"speed-up over one worker, ps tasks {args.ps}"
              + (", gradients as bfloat16" if args.compression == "bf16" else ""))
        for gbps in [float(g) for g in args.gbps.split(",")]:
            for serve_name, serve in (("one-sided", float("inf")), ("served", args.serve_gbs * 1e9)):
                # bfloat16 in the ps modes needs memory served by messages; allreduce takes it
                # anywhere.
                if serve_name == "served" and not (args.served or args.compression == "bf16"):
                    continue
                if serve_name == "one-sided" and args.compression == "bf16":
                    continue
                print(f"\n{gbps:g} Gb/s, ps memory {serve_name}\n")
                header = "| workers | allreduce |" + "".join(
                    f" sync P={p} | async P={p} |" for p in args.ps)
                print(header)
                print("|---:|---:|" + "---:|---:|" * len(args.ps))
                for w in [int(x) for x in args.workers.split(",")]:
                    row = f"| {w} |"
                    one, ar, _, _ = predict(model, w, 1, gbps, serve, args.alpha, args.compute_ms,
                                            args.compression)
                    row += f" {ar / one:.1f}x |"
                    for p in args.ps:
                        _, _, sy, asy = predict(model, w, p, gbps, serve, args.alpha,
                                                args.compute_ms, args.compression)
                        row += f" {sy / one:.1f}x | {asy / one:.1f}x |"
                    print(row)


# The one-node check (docs/SCALING.md, "Check against one node"): 1 ps + 2 workers over TCP
# loopback on a 2-vCPU AMD EPYC (Zen 4). Compute: bench_train --threads=1 (x86-64-v4 kernels).
# Link rates: bench_comm over TCP alone, 1e6 floats, quiet sitting. Measured: train over TCP
# alone, medians of the same run (docs/BENCHMARKS.md, "Over TCP alone").
CHECK_COMPUTE_MS = {"mlp": 0.654, "cnn": 45.6}
CHECK_RATES = {"pull": 5.2e9, "push": 3.6e9, "allreduce": 2.16e9}  # bytes/s
CHECK_MEASURED = {  # images/s
    ("mlp", "allreduce"): 80_276, ("mlp", "sync"): 36_344, ("mlp", "async"): 48_752,
    ("cnn", "allreduce"): 2_135, ("cnn", "sync"): 1_435, ("cnn", "async"): 1_414,
}


def check():
    """One node, 2 workers + 1 ps over TCP loopback: the link rates bench_comm measured there,
    and one more bound only a single node has: the three processes share two cores, and a
    transfer over loopback keeps both its ends busy."""
    pull, push, ar_rate = CHECK_RATES["pull"], CHECK_RATES["push"], CHECK_RATES["allreduce"]
    cores = 2
    print("| model | mode | predicted images/s | measured | predicted / measured |")
    print("|---|---|---:|---:|---:|")
    for model in ("mlp", "cnn"):
        params, _ = MODELS[model]
        s, c, w = 4.0 * params, CHECK_COMPUTE_MS[model] / 1e3, 2
        t_push, t_pull = s / push, s / pull
        # allreduce: each worker computes, then the two exchange s bytes each way.
        t = c + s / ar_rate
        cpu = w * (c + s / ar_rate)  # both ends busy while the bytes move
        rates = {"allreduce": min(w * BATCH / t, cores * w * BATCH / cpu)}
        # sync: the ps answers one request at a time: the other worker's push, the chief's take
        # and write, the other worker's pull; the workers wait for all of it.
        ps_busy = (w - 1) * t_push + t_pull + t_push + (w - 1) * t_pull
        t = c + ps_busy
        cpu = w * c + 2 * ps_busy  # the ps and the origin each spend the transfer's time
        rates["sync"] = min(w * BATCH / t, cores * w * BATCH / cpu)
        # async: each worker pushes and pulls per step; the ps serves both.
        per_step = t_push + t_pull
        cpu_per_step = c + 2 * per_step
        rates["async"] = min(w * BATCH / (c + per_step), BATCH / per_step,
                             cores * BATCH / cpu_per_step)
        for mode in ("allreduce", "sync", "async"):
            got = CHECK_MEASURED[(model, mode)]
            print(f"| {model} | {mode} | {rates[mode]:,.0f} | {got:,} | {rates[mode] / got:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp,cnn,resnet")
    parser.add_argument("--gbps", default="25,100,400", help="link speeds, Gb/s")
    parser.add_argument("--workers", default="2,4,8,16,32,64")
    parser.add_argument("--ps", default="1,4", type=lambda t: [int(x) for x in t.split(",")])
    parser.add_argument("--alpha", default=ALPHA, type=float, help="seconds per message")
    parser.add_argument("--compute_ms", default=None, type=float,
                        help="compute per step, ms (default: measured here, one thread)")
    parser.add_argument("--serve_gbs", default=1.1, type=float,
                        help="GB/s one ps task serves by messages (TCP; measured: pushes 1.0-1.2)")
    parser.add_argument("--served", action="store_true",
                        help="also the tables for ps memory served by messages (TCP)")
    parser.add_argument("--compression", default="none", choices=["none", "bf16"],
                        help="gradients on the wire (bf16: the ps tables are for served memory)")
    parser.add_argument("--check", action="store_true", help="the one-node check")
    args = parser.parse_args()
    if args.check:
        check()
    else:
        tables(args)


if __name__ == "__main__":
    main()
