#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) on this node, for beside scripts/bench_scaling.sh.

    scripts/bench_ddp.py --model cnn --workers 2 [--steps 60]

Starts --workers processes, each with one thread, batch 64 and the network of
scripts/bench_pytorch.py (the same layers as Cohort's built-in model), on a preloaded random batch,
SGD with momentum 0.9; DDP averages the gradients with gloo's allreduce, in buckets that leave
during the backward pass. Prints the group's images/s: workers x 64 x --steps over the slowest
worker's time for those steps, after 5 untimed steps.
"""
import argparse
import os
import socket
import sys
import time

# One thread per process, as the Cohort runs beside it (before torch starts its pools).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_pytorch  # noqa: E402

BATCH = 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.workers)
    torch.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(bench_pytorch.models()[args.model])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = bench_pytorch.training_step(model, opt, torch.rand(BATCH, 1, 28, 28),
                                       torch.randint(0, 10, (BATCH,)))
    for _ in range(5):
        step()
    dist.barrier()
    start = time.time()
    for _ in range(args.steps):
        step()
    elapsed = torch.tensor([time.time() - start])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(round(args.workers * BATCH * args.steps / elapsed.item()))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "small_cnn", "resnet"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    mp.spawn(worker, args=(args, free_port()), nprocs=args.workers)


if __name__ == "__main__":
    main()
