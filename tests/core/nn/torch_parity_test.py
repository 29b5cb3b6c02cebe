"""Cohort's LSTM, GRU, Bidirectional, MultiHeadAttention, Conv2DTranspose, UpSampling2D,
DepthwiseConv2D, SeparableConv2D and GroupNormalization against PyTorch's: the same weights and
input give the same outputs and the same gradients of the input and of every variable, to 1e-5;
padding masks against PyTorch's packed sequences and key padding mask, cross-attention against
its attention with a key and value of their own width, LSTM and GRU from a given initial state to
their final state against PyTorch's (h_0, c_0) and (h_n, c_n).

Usage: torch_parity_test.py DUMP (the program that prints Cohort's side as JSON).

Cohort's layers keep Keras's layouts: kernels [in, out]; the LSTM's gates in the order i, f, g, o
with TensorFlow 1's forget bias of 1 added to f's sum; the GRU's in the order z, r, n with biases
[2, 3 * units] (input, recurrent). PyTorch keeps the transposes, two biases per recurrent layer,
the GRU's gates in the order r, z, n, and attention's three input projections in one matrix.
"""
import json
import subprocess
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
data = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
n, steps, features = data["batch"], data["steps"], data["features"]
units, heads = data["units"], data["heads"]
failures = []


def compare(what, ours, theirs):
    ours, theirs = np.asarray(ours).ravel(), np.asarray(theirs).ravel()
    error = float(np.abs(ours - theirs).max())
    scale = float(np.abs(theirs).max())
    print(f"{what}: largest difference {error:.2e} (largest value {scale:.2f})")
    if ours.shape != theirs.shape or not error <= 1e-5 * max(1.0, scale):
        failures.append(what)


def tensor(values):
    return torch.tensor(np.ascontiguousarray(values, dtype=np.float64))


def run(module, v, out_size, mask=None):
    """Runs `module` on the case's input (packed to each example's length where the case has a
    padding mask: PyTorch's padded outputs are zeros, as Cohort's); compares the outputs and the
    input's gradient."""
    x = torch.tensor(np.array(v["x"]).reshape(n, steps, features), requires_grad=True)
    if "mask" in v:
        lengths = v["mask"].reshape(n, steps).sum(axis=1).astype(np.int64)
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=True,
                                                         enforce_sorted=False)
        y = torch.nn.utils.rnn.pad_packed_sequence(module(packed)[0], batch_first=True,
                                                   total_length=steps)[0]
    elif mask is None:
        y = module(x)[0]
    else:
        y = module(x, x, x, attn_mask=mask, need_weights=False)[0]
    compare(f"{name} outputs", v["y"], y.detach().numpy())
    (y * tensor(np.array(v["grad_y"]).reshape(n, steps, out_size))).sum().backward()
    compare(f"{name} input gradient", v["grad_x"], x.grad.numpy())


def run_from_state(module, v, lstm):
    """Runs `module` from the case's initial state ("value": h, and c for an LSTM, side by side)
    to its final state (h_n and c_n side by side, Cohort's output); compares the final state and
    the gradients of the input and of the initial state."""
    x = torch.tensor(np.array(v["x"]).reshape(n, steps, features), requires_grad=True)
    state = torch.tensor(np.array(v["value"]).reshape(n, -1), requires_grad=True)
    h0 = state[:, :units].unsqueeze(0)
    if lstm:
        _, (h, c) = module(x, (h0, state[:, units:].unsqueeze(0)))
        final = torch.cat([h[0], c[0]], dim=1)
    else:
        final = module(x, h0)[1][0]
    compare(f"{name} final state", v["y"], final.detach().numpy())
    (final * tensor(np.array(v["grad_y"]).reshape(final.shape))).sum().backward()
    compare(f"{name} input gradient", v["grad_x"], x.grad.numpy())
    compare(f"{name} initial state gradient", v["grad_value"], state.grad.numpy())


for name in ("lstm", "gru", "masked_lstm", "masked_gru", "lstm_state", "gru_state"):
    v = {key: np.array(value) for key, value in data[name].items()}
    lstm = "lstm" in name
    gates = 4 if lstm else 3
    columns = gates * units
    if lstm:
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
    module.weight_ih_l0.data = tensor(v["kernel"].reshape(features, columns).T[order])
    module.weight_hh_l0.data = tensor(v["recurrent_kernel"].reshape(units, columns).T[order])
    module.bias_ih_l0.data = tensor(input_bias[order])
    module.bias_hh_l0.data = tensor(recurrent_bias[order])
    if name.endswith("_state"):
        run_from_state(module, v, lstm)
    else:
        run(module, v, units)
    back = np.argsort(order)
    compare(f"{name} kernel gradient", v["grad:kernel"], module.weight_ih_l0.grad.numpy()[back].T)
    compare(f"{name} recurrent kernel gradient", v["grad:recurrent_kernel"],
            module.weight_hh_l0.grad.numpy()[back].T)
    bias_grad = module.bias_ih_l0.grad.numpy()[back]
    if not lstm:
        bias_grad = np.concatenate([bias_grad, module.bias_hh_l0.grad.numpy()[back]])
    compare(f"{name} bias gradient", v["grad:bias"], bias_grad)

# A bidirectional LSTM: PyTorch's second direction reads the sequence reversed and gives its
# outputs in time order beside the first's, as Keras's Bidirectional concatenates them.
name = "bidirectional_lstm"
v = {key: np.array(value) for key, value in data[name].items()}
module = torch.nn.LSTM(features, units, batch_first=True, bidirectional=True)
columns = 4 * units
directions = (("forward", ""), ("backward", "_reverse"))
for ours, suffix in directions:
    bias = v[ours + "/bias"].copy()
    bias[units:2 * units] += 1.0  # the forget bias
    getattr(module, "weight_ih_l0" + suffix).data = tensor(v[ours + "/kernel"].reshape(features, columns).T)
    getattr(module, "weight_hh_l0" + suffix).data = tensor(v[ours + "/recurrent_kernel"].reshape(units, columns).T)
    getattr(module, "bias_ih_l0" + suffix).data = tensor(bias)
    getattr(module, "bias_hh_l0" + suffix).data = torch.zeros(columns)
run(module, v, 2 * units)
for ours, suffix in directions:
    compare(f"{name} {ours} kernel gradient", v[f"grad:{ours}/kernel"],
            getattr(module, "weight_ih_l0" + suffix).grad.numpy().T)
    compare(f"{name} {ours} recurrent kernel gradient", v[f"grad:{ours}/recurrent_kernel"],
            getattr(module, "weight_hh_l0" + suffix).grad.numpy().T)
    compare(f"{name} {ours} bias gradient", v[f"grad:{ours}/bias"],
            getattr(module, "bias_ih_l0" + suffix).grad.numpy())

for name in ("attention", "causal_attention"):
    v = {key: np.array(value) for key, value in data[name].items()}
    module = torch.nn.MultiheadAttention(features, heads, batch_first=True)
    parts = ("query", "key", "value")
    module.in_proj_weight.data = tensor(np.concatenate([v[p + "/kernel"].reshape(features, features).T for p in parts]))
    module.in_proj_bias.data = tensor(np.concatenate([v[p + "/bias"] for p in parts]))
    module.out_proj.weight.data = tensor(v["attention_output/kernel"].reshape(features, features).T)
    module.out_proj.bias.data = tensor(v["attention_output/bias"])
    mask = torch.zeros(steps, steps, dtype=torch.bool)
    if name == "causal_attention":
        mask = torch.triu(torch.ones(steps, steps, dtype=torch.bool), diagonal=1)
    run(module, v, features, mask)
    kernels = module.in_proj_weight.grad.numpy().reshape(3, features, features)
    biases = module.in_proj_bias.grad.numpy().reshape(3, features)
    for i, part in enumerate(parts):
        compare(f"{name} {part} kernel gradient", v[f"grad:{part}/kernel"], kernels[i].T)
        compare(f"{name} {part} bias gradient", v[f"grad:{part}/bias"], biases[i])
    compare(f"{name} output kernel gradient", v["grad:attention_output/kernel"],
            module.out_proj.weight.grad.numpy().T)
    compare(f"{name} output bias gradient", v["grad:attention_output/bias"], module.out_proj.bias.grad.numpy())

# Cross-attention of a query [5, features] to a value [steps, 6] under a padding mask of the
# value: PyTorch's attention with kdim = vdim = 6 (separate projections) and a key padding mask.
name = "cross_attention"
v = {key: np.array(value) for key, value in data[name].items()}
query_steps, value_features = v["x"].size // (n * features), 6
module = torch.nn.MultiheadAttention(features, heads, batch_first=True, kdim=value_features,
                                     vdim=value_features)
module.q_proj_weight.data = tensor(v["query/kernel"].reshape(features, features).T)
module.k_proj_weight.data = tensor(v["key/kernel"].reshape(value_features, features).T)
module.v_proj_weight.data = tensor(v["value/kernel"].reshape(value_features, features).T)
module.in_proj_bias.data = tensor(np.concatenate([v[p + "/bias"] for p in ("query", "key", "value")]))
module.out_proj.weight.data = tensor(v["attention_output/kernel"].reshape(features, features).T)
module.out_proj.bias.data = tensor(v["attention_output/bias"])
query = torch.tensor(v["x"].reshape(n, query_steps, features), requires_grad=True)
value = torch.tensor(v["value"].reshape(n, steps, value_features), requires_grad=True)
padding = torch.tensor(v["mask"].reshape(n, steps) == 0)
y = module(query, value, value, key_padding_mask=padding, need_weights=False)[0]
compare(f"{name} outputs", v["y"], y.detach().numpy())
(y * tensor(v["grad_y"].reshape(n, query_steps, features))).sum().backward()
compare(f"{name} query gradient", v["grad_x"], query.grad.numpy())
compare(f"{name} value gradient", v["grad_value"], value.grad.numpy())
for part, weight in (("query", module.q_proj_weight), ("key", module.k_proj_weight),
                     ("value", module.v_proj_weight)):
    compare(f"{name} {part} kernel gradient", v[f"grad:{part}/kernel"], weight.grad.numpy().T)
biases = module.in_proj_bias.grad.numpy().reshape(3, features)
for i, part in enumerate(("query", "key", "value")):
    compare(f"{name} {part} bias gradient", v[f"grad:{part}/bias"], biases[i])
compare(f"{name} output kernel gradient", v["grad:attention_output/kernel"],
        module.out_proj.weight.grad.numpy().T)


def image(v, key):
    """The case's NHWC tensor `key` ("x", "y", ...) as NCHW, of the shape the dump gives."""
    shape = v["x_shape" if key in ("x", "grad_x") else "y_shape"].astype(np.int64)
    return np.array(v[key]).reshape(shape).transpose(0, 3, 1, 2)


# Transposed convolutions, named conv_transpose_{same,valid}_{kh}x{kw}_{sh}x{sw}[_d{dilation}]
# [_op{output_padding}][_relu]: PyTorch's full scatter ((in - 1) * stride + extent, no padding,
# extent = (kernel - 1) * dilation + 1), then cropped or extended to Cohort's size as TensorFlow
# pads a convolution from that size (SAME: the padding (in - 1) * stride + extent - out split
# with the extra one after; VALID: none), by F.pad, which crops where its padding is negative
# (and adds zero rows, which get the bias alone, where output_padding asks for rows after the
# last window). PyTorch's weight is [in, out, kh, kw], Keras's [kh, kw, out, in].
placed_as_pytorch = 0
for name in [key for key in data if key.startswith("conv_transpose_")]:
    v = {key: np.array(value) for key, value in data[name].items()}
    padding, kernel, strides, *rest = name.split("_")[2:]
    kh, kw = (int(k) for k in kernel.split("x"))
    sh, sw = (int(k) for k in strides.split("x"))
    d = next((int(t[1:]) for t in rest if t.startswith("d")), 1)
    x = torch.tensor(image(v, "x"), requires_grad=True)
    channels, filters = x.shape[1], v["bias"].size
    module = torch.nn.ConvTranspose2d(channels, filters, (kh, kw), stride=(sh, sw), dilation=d, bias=False)
    module.weight.data = tensor(v["kernel"].reshape(kh, kw, filters, channels).transpose(3, 2, 0, 1))
    bias = torch.zeros(filters, requires_grad=True)
    bias.data = tensor(v["bias"])
    full = module(x)
    out_h, out_w = (int(size) for size in v["y_shape"][1:3])
    top = max(full.shape[2] - out_h, 0) // 2 if padding == "same" else 0
    left = max(full.shape[3] - out_w, 0) // 2 if padding == "same" else 0
    y = torch.nn.functional.pad(full, (-left, out_w - full.shape[3] + left, -top, out_h - full.shape[2] + top))
    y = y + bias.reshape(1, filters, 1, 1)
    if "relu" in rest:
        y = torch.relu(y)
    compare(f"{name} outputs", image(v, "y"), y.detach().numpy())
    (y * tensor(image(v, "grad_y"))).sum().backward()
    compare(f"{name} input gradient", image(v, "grad_x"), x.grad.numpy())
    compare(f"{name} kernel gradient", v["grad:kernel"], module.weight.grad.numpy().transpose(2, 3, 1, 0))
    compare(f"{name} bias gradient", v["grad:bias"], bias.grad.numpy())
    # With output_padding: PyTorch's own ConvTranspose2d(padding=p, output_padding), p = k' / 2
    # (SAME) or 0, gives the same size, and the same image where TensorFlow's padding before is p.
    output_padding = next((int(t[2:]) for t in rest if t.startswith("op")), None)
    if output_padding is not None:
        p_h = ((kh - 1) * d + 1) // 2 if padding == "same" else 0
        p_w = ((kw - 1) * d + 1) // 2 if padding == "same" else 0
        direct = torch.nn.functional.conv_transpose2d(
            x.detach(), module.weight.detach(), tensor(v["bias"]), stride=(sh, sw),
            padding=(p_h, p_w), output_padding=output_padding, dilation=d)
        if tuple(direct.shape[2:]) != (out_h, out_w):
            sys.exit(f"{name}: PyTorch's output_padding gives {tuple(direct.shape[2:])}, Cohort {(out_h, out_w)}")
        if (top, left) == (p_h, p_w):
            compare(f"{name} outputs, PyTorch's padding {p_h}x{p_w}",
                    image(v, "y"), (torch.relu(direct) if "relu" in rest else direct).numpy())
            placed_as_pytorch += 1

if placed_as_pytorch < 2:
    sys.exit(f"only {placed_as_pytorch} output_padding cases compared with PyTorch's own padding")

# UpSampling2D: PyTorch's Upsample by the same factors, nearest-neighbour and bilinear (half-pixel
# centres: align_corners=False).
for name in ["upsampling_nearest", "upsampling_bilinear"]:
    v = {key: np.array(value) for key, value in data[name].items()}
    x = torch.tensor(image(v, "x"), requires_grad=True)
    factor = tuple(int(o // i) for o, i in zip(v["y_shape"][1:3], v["x_shape"][1:3]))
    mode = name.split("_")[1]
    y = torch.nn.Upsample(scale_factor=factor, mode=mode,
                          **({"align_corners": False} if mode == "bilinear" else {}))(x)
    compare(f"{name} outputs", image(v, "y"), y.detach().numpy())
    (y * tensor(image(v, "grad_y"))).sum().backward()
    compare(f"{name} input gradient", image(v, "grad_x"), x.grad.numpy())


def tf_padding(size, kernel, stride, same):
    """TensorFlow's padding before and after one dimension (SAME: the extra one after)."""
    if not same:
        return 0, 0
    pad = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return pad // 2, pad - pad // 2


# Depthwise convolutions: PyTorch's Conv2d with groups = channels, its weight [C x M, 1, k, k]
# with Keras's output channel order c x M + m; the input padded as TensorFlow pads it. A
# separable one: that, then a 1x1 Conv2d with the bias.
for name in [key for key in data if key.startswith(("depthwise_", "separable_"))]:
    v = {key: np.array(value) for key, value in data[name].items()}
    kind, padding, kernel, stride, multiplier, *rest = name.split("_")
    k, s_, m = int(kernel), int(stride), int(multiplier)
    d = next((int(t[1:]) for t in rest if t.startswith("d")), 1)
    x = torch.tensor(image(v, "x"), requires_grad=True)
    c = x.shape[1]
    top, bottom = tf_padding(x.shape[2], (k - 1) * d + 1, s_, padding == "same")
    left, right = tf_padding(x.shape[3], (k - 1) * d + 1, s_, padding == "same")
    prefix = "depthwise/" if kind == "separable" else ""
    depthwise = torch.nn.Conv2d(c, c * m, k, stride=s_, dilation=d, groups=c, bias=False)
    depthwise.weight.data = tensor(v[prefix + "kernel"].reshape(k, k, c, m).transpose(2, 3, 0, 1).reshape(c * m, 1, k, k))
    y = depthwise(torch.nn.functional.pad(x, (left, right, top, bottom)))
    if kind == "depthwise":
        bias = torch.zeros(c * m, requires_grad=True)
        bias.data = tensor(v["bias"])
    else:
        filters = v["pointwise/bias"].size
        pointwise = torch.nn.Conv2d(c * m, filters, 1, bias=False)
        pointwise.weight.data = tensor(v["pointwise/kernel"].reshape(c * m, filters).T.reshape(filters, c * m, 1, 1))
        y = pointwise(y)
        bias = torch.zeros(filters, requires_grad=True)
        bias.data = tensor(v["pointwise/bias"])
    y = y + bias.reshape(1, -1, 1, 1)
    if "relu" in rest:
        y = torch.relu(y)
    compare(f"{name} outputs", image(v, "y"), y.detach().numpy())
    (y * tensor(image(v, "grad_y"))).sum().backward()
    compare(f"{name} input gradient", image(v, "grad_x"), x.grad.numpy())
    compare(f"{name} depthwise kernel gradient", v["grad:" + prefix + "kernel"],
            depthwise.weight.grad.numpy().reshape(c, m, k, k).transpose(2, 3, 0, 1))
    if kind == "separable":
        compare(f"{name} pointwise kernel gradient", v["grad:pointwise/kernel"],
                pointwise.weight.grad.numpy().reshape(-1, c * m).T)
    compare(f"{name} bias gradient", v["grad:" + ("bias" if kind == "depthwise" else "pointwise/bias")],
            bias.grad.numpy())

# GroupNormalization: PyTorch's GroupNorm with the same groups and epsilon (Keras's 1e-3).
name = "group_norm"
v = {key: np.array(value) for key, value in data[name].items()}
x = torch.tensor(image(v, "x"), requires_grad=True)
module = torch.nn.GroupNorm(2, x.shape[1], eps=1e-3)
module.weight.data = tensor(v["gamma"])
module.bias.data = tensor(v["beta"])
y = module(x)
compare(f"{name} outputs", image(v, "y"), y.detach().numpy())
(y * tensor(image(v, "grad_y"))).sum().backward()
compare(f"{name} input gradient", image(v, "grad_x"), x.grad.numpy())
compare(f"{name} gamma gradient", v["grad:gamma"], module.weight.grad.numpy())
compare(f"{name} beta gradient", v["grad:beta"], module.bias.grad.numpy())

if failures:
    sys.exit("differ from PyTorch: " + ", ".join(failures))
print("LSTM, GRU, Bidirectional, MultiHeadAttention (masked and cross), Conv2DTranspose, "
      "UpSampling2D, DepthwiseConv2D, SeparableConv2D and GroupNormalization agree with PyTorch")
