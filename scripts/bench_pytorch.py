#!/usr/bin/python3
"""PyTorch's training throughput for Cohort's built-in models, for a side-by-side ratio.

The PyTorch models are the same networks: layer for layer, biases included, batch norm with
Cohort's epsilon (1e-3); PyTorch's CPU convolutions and batch norm run on oneDNN where its
build has it (Debian's does).

    OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX scripts/bench_pytorch.py [--threads 1] [--seconds 4]
        [--channels_last]
    scripts/bench_pytorch.py --device cuda --batch_size 256 --models mlp,cnn

Left at its default, OpenBLAS runs its own threads beside torch.set_num_threads(1).

Same models and step as build/bin/bench_train (a batch of 28x28x1, forward, cross-entropy,
backward, SGD update). Prints images/s per model (median of timed windows after a warm-up). On
CUDA the math is plain FP32 (TF32 off, as bench_train without --tf32), and each window ends with
a synchronisation, so queued work is counted.
"""
import argparse
import statistics
import time

import torch
from torch import nn


class Block(nn.Module):
    """Cohort's resnet basic block: conv 3x3, BN, ReLU, conv 3x3, BN, + shortcut, ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout, eps=1e-3),
                                  nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1),
                                  nn.BatchNorm2d(cout, eps=1e-3))
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride),
                                          nn.BatchNorm2d(cout, eps=1e-3))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet(widths=(16, 32, 64), blocks=2):
    """Cohort's built-in resnet (core/nn/models.h): stem, 3 stages of `blocks` blocks, GAP, Dense."""
    layers = [nn.Conv2d(1, widths[0], 3, 1, 1), nn.BatchNorm2d(widths[0], eps=1e-3), nn.ReLU()]
    cin = widths[0]
    for s, w in enumerate(widths):
        for b in range(blocks):
            layers.append(Block(cin, w, 2 if s > 0 and b == 0 else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)


class Rows(nn.Module):
    """Cohort's rnn (core/nn/models.h): each image's 28 rows as steps, an LSTM or GRU of 128
    units, the last step's output to Dense 10."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(28, 128, batch_first=True)
        self.logits = nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.rnn(x.reshape(x.shape[0], 28, 28))
        return self.logits(out[:, -1])


class EncoderBlock(nn.Module):
    """Cohort's transformer_block: pre-norm attention and feed-forward network, each added back."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-3)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-3)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


class Transformer(nn.Module):
    """Cohort's transformer: rows projected to 64, a learned position embedding, two blocks of 4
    heads, a last norm, the mean over the steps, Dense 10."""

    def __init__(self, dim=64, heads=4, blocks=2):
        super().__init__()
        self.embed = nn.Linear(28, dim)
        self.position = nn.Parameter(torch.randn(28, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim, eps=1e-3)
        self.logits = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x.reshape(x.shape[0], 28, 28)) + self.position
        return self.logits(self.norm(self.blocks(x)).mean(dim=1))


def mobilenet():
    """Cohort's built-in mobilenet: conv 3x3 of 32 + BN + ReLU, five depthwise-separable blocks
    (3x3 depthwise + BN + ReLU, 1x1 + BN + ReLU), global average pooling, Dense."""
    layers, channels = [nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()], 32
    for filters, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1)):
        layers += [nn.Conv2d(channels, channels, 3, stride=stride, padding=1, groups=channels, bias=False),
                   nn.BatchNorm2d(channels), nn.ReLU(),
                   nn.Conv2d(channels, filters, 1), nn.BatchNorm2d(filters), nn.ReLU()]
        channels = filters
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))


def models():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(3136, 1024), nn.ReLU(), nn.Dropout(0.5), nn.Linear(1024, 10))
    small = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(1568, 10))
    return {"mlp": mlp, "cnn": cnn, "small_cnn": small, "resnet": resnet(), "mobilenet": mobilenet(),
            "lstm": Rows(nn.LSTM), "gru": Rows(nn.GRU), "transformer": Transformer()}


def training_step(model, opt, x, y):
    """A step as bench_train times it: forward, cross-entropy, backward, the optimizer's update."""
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--models", default="mlp,cnn,small_cnn,resnet")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--channels_last", action="store_true",
                        help="NHWC activations (Cohort's layout); oneDNN may pick other kernels")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    batch = args.batch_size
    x = torch.rand(batch, 1, 28, 28, device=device)
    layout = torch.channels_last if args.channels_last else torch.contiguous_format
    x = x.to(memory_format=layout)
    y = torch.randint(0, 10, (batch,), device=device)
    for name, model in models().items():
        if name not in args.models.split(","):
            continue
        model.to(device, memory_format=layout)
        step = training_step(model, torch.optim.SGD(model.parameters(), lr=0.01), x, y)
        for _ in range(5):
            step()
        sync()
        rates = []
        for _ in range(5):
            n, start = 0, time.time()
            while time.time() - start < args.seconds / 5:
                step()
                n += batch
            sync()
            rates.append(n / (time.time() - start))
        print(f"{name:10s} {args.device} threads {args.threads} batch {batch}"
              f"{' channels_last' if args.channels_last else ''}  "
              f"{statistics.median(rates):10.0f} images/s")


if __name__ == "__main__":
    main()
