"""Cohort's LSTM and GRU against PyTorch's: the same weights and input give the same outputs and
the same gradients of the input, the kernels and the biases, to 1e-5.

Usage: recurrent_torch_test.py RECURRENT_DUMP (the program that prints Cohort's side as JSON).

Cohort's layers keep Keras's layout: kernels [features, gates * units] and [units, gates *
units], the LSTM's gates in the order i, f, g, o with TensorFlow 1's forget bias of 1 added to f's
sum, the GRU's in the order z, r, n with its biases [2, 3 * units] (input, recurrent). PyTorch
keeps the transposes, two biases, and the GRU's gates in the order r, z, n.
"""
import json
import subprocess
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
data = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
n, steps, features, units = data["batch"], data["steps"], data["features"], data["units"]
failures = []


def compare(what, ours, theirs):
    error = float(np.abs(np.asarray(ours).ravel() - np.asarray(theirs).ravel()).max())
    scale = float(np.abs(np.asarray(theirs)).max())
    print(f"{what}: largest difference {error:.2e} (largest value {scale:.2f})")
    if not error <= 1e-5 * max(1.0, scale):
        failures.append(what)


for cell in ("lstm", "gru"):
    v = {key: np.array(value) for key, value in data[cell].items()}
    gates = 4 if cell == "lstm" else 3
    columns = gates * units
    kernel = v["kernel"].reshape(features, columns)
    recurrent = v["recurrent_kernel"].reshape(units, columns)
    if cell == "lstm":
        order = np.arange(columns)
        module = torch.nn.LSTM(features, units, batch_first=True)
        input_bias = v["bias"].copy()
        input_bias[units:2 * units] += 1.0  # the forget bias
        recurrent_bias = np.zeros(columns)
    else:
        # PyTorch's r, z, n from Cohort's z, r, n.
        order = np.concatenate([np.arange(units, 2 * units), np.arange(units), np.arange(2 * units, 3 * units)])
        module = torch.nn.GRU(features, units, batch_first=True)
        input_bias, recurrent_bias = v["bias"].reshape(2, columns)
    module.weight_ih_l0.data = torch.tensor(kernel.T[order].copy())
    module.weight_hh_l0.data = torch.tensor(recurrent.T[order].copy())
    module.bias_ih_l0.data = torch.tensor(input_bias[order].copy())
    module.bias_hh_l0.data = torch.tensor(recurrent_bias[order].copy())
    x = torch.tensor(v["x"].reshape(n, steps, features), requires_grad=True)
    y, _ = module(x)
    (y * torch.tensor(v["grad_y"].reshape(n, steps, units))).sum().backward()
    compare(f"{cell} outputs", v["y"], y.detach().numpy())
    compare(f"{cell} input gradient", v["grad_x"], x.grad.numpy())
    back = np.argsort(order)
    grads = v["grads"]
    kernel_size, recurrent_size = features * columns, units * columns
    compare(f"{cell} kernel gradient", grads[:kernel_size], module.weight_ih_l0.grad.numpy()[back].T)
    compare(f"{cell} recurrent kernel gradient", grads[kernel_size:kernel_size + recurrent_size],
            module.weight_hh_l0.grad.numpy()[back].T)
    bias_grad = module.bias_ih_l0.grad.numpy()[back]
    if cell == "gru":
        bias_grad = np.concatenate([bias_grad, module.bias_hh_l0.grad.numpy()[back]])
    compare(f"{cell} bias gradient", grads[kernel_size + recurrent_size:], bias_grad)

if failures:
    sys.exit("differ from PyTorch: " + ", ".join(failures))
print("LSTM and GRU agree with PyTorch")
