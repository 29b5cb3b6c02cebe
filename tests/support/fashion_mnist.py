"""Fashion-MNIST's IDX files read with numpy, for the tests that write its images in other forms.

    from fashion_mnist import first
    images, labels = first("/usr/share/datasets/fashion-mnist", "train", 3000)  # or "t10k"
"""

import gzip
import os
import sys

import numpy as np


def _idx(data_dir, name, offset):
    for path in (f"{data_dir}/{name}.gz", f"{data_dir}/{name}"):
        if os.path.exists(path):
            raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
            return np.frombuffer(raw, np.uint8, offset=offset)
    sys.exit(f"no {data_dir}/{name}[.gz] (Debian: dataset-fashion-mnist)")


def first(data_dir, prefix, n):
    """The first `n` images ([n, 28, 28] uint8) and labels of split `prefix` ("train", "t10k")."""
    images = _idx(data_dir, f"{prefix}-images-idx3-ubyte", 16).reshape(-1, 28, 28)[:n]
    labels = _idx(data_dir, f"{prefix}-labels-idx1-ubyte", 8)[:n]
    return images, labels
