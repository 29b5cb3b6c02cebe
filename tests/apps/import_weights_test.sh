#!/usr/bin/env bash
# Weights from another framework: an MLP trained by PyTorch on Fashion-MNIST, saved in
# safetensors as Hugging Face's save_file writes it (no Cohort metadata; bfloat16, float16,
# float32 and float64 tensors) under the variable names and layouts of `train --model=mlp`,
# warm-starts `train`:
# - one step at a learning rate of 1e-30 later, its test accuracy is the one PyTorch computes
#   with the same (rounded) weights, within 0.002 (the order of the sums may flip a few close
#   calls); an import in the wrong layout would be at chance, 0.1;
# - a kernel left in PyTorch's layout ([outputs, inputs]) is refused in one line that says to
#   transpose it;
# - a CNN PyTorch trained on 3000 images (two 5x5 convolutions and their pools, a dense layer
#   on the flattened maps), its convolution kernels permuted to [height, width, inputs, outputs]
#   and the dense kernel's rows reordered from PyTorch's (channel, row, column) flattening to
#   Cohort's (row, column, channel), as GUIDE.md's table says: `train --model=cnn` scores
#   PyTorch's test accuracy with it on 2000 test images, within 0.002.
#
#   import_weights_test.sh TRAIN MPIEXEC NP_FLAG WORKDIR DATA_DIR
set -euo pipefail
train=$1 mpiexec=$2 np_flag=$3 work=$4 data_dir=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../support/skip.sh"
/usr/bin/python3 -c "import numpy, torch" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and torch" "install python3-numpy python3-torch"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

PYTHONPATH="$here/../support" /usr/bin/python3 - "$data_dir" <<'PY'
import json, struct, sys
import numpy as np
import torch
from fashion_mnist import first

torch.manual_seed(0)
torch.set_num_threads(2)
x, y = first(sys.argv[1], "train", 60000)
x = torch.from_numpy((x / 255.0).astype(np.float32).reshape(-1, 784))
y = torch.from_numpy(y.astype(np.int64))
model = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
for epoch in range(2):
    order = torch.randperm(60000)
    for i in range(0, 60000, 128):
        batch = order[i:i + 128]
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        optimizer.step()

def save(path, tensors, metadata):
    """A safetensors file as Hugging Face's save_file lays it out: {name: (dtype, array)}."""
    header, data = {}, b""
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)

w1, b1 = model[0].weight.detach(), model[0].bias.detach()
w2, b2 = model[2].weight.detach(), model[2].bias.detach()
kernel1 = w1.t().contiguous().to(torch.bfloat16)  # Cohort's dense kernel is [inputs, outputs]
tensors = {
    "hidden1/kernel": ("BF16", kernel1.view(torch.int16).numpy()),
    "hidden1/bias": ("F16", b1.numpy().astype(np.float16)),
    "logits/kernel": ("F32", w2.t().contiguous().numpy()),
    "logits/bias": ("F64", b2.numpy().astype(np.float64)),
}
save("mlp.safetensors", tensors, {"format": "pt"})
tensors["hidden1/kernel"] = ("F32", w1.numpy())  # PyTorch's layout, untransposed
save("untransposed.safetensors", tensors, None)

# The accuracy of the weights as the file holds them, read back as float32.
k1 = kernel1.float()
h1 = torch.from_numpy(b1.numpy().astype(np.float16).astype(np.float32))
tx, ty = first(sys.argv[1], "t10k", 10000)
tx = torch.from_numpy((tx / 255.0).astype(np.float32).reshape(-1, 784))
logits = torch.relu(tx @ k1 + h1) @ w2.t() + b2
accuracy = (logits.argmax(1).numpy() == ty).mean()
print(f"PyTorch's test accuracy with the saved weights: {accuracy:.4f}")
open("pytorch_accuracy", "w").write(f"{accuracy:.4f}\n")
PY

status=0
timeout 120 "$mpiexec" "$np_flag" 1 "$train" --mode=local --model=mlp --hidden=64 --print_cluster=false \
  --warm_start_from=mlp.safetensors --train_steps=1 --optimizer=sgd --learning_rate=1e-30 \
  --log_every_steps=0 > import.log 2>&1 || status=$?
cat import.log
((status == 0)) || { echo "the warm-started job failed (status $status)"; exit 1; }
grep -qF "warm start from mlp.safetensors (another framework's weights, taken in Cohort's layouts (a square kernel as it is)); training starts at global step 0" import.log \
  || { echo "no warm-start line"; exit 1; }
ours=$(sed -nE 's/^final: global step 1, test accuracy ([0-9.]+),.*/\1/p' import.log)
theirs=$(cat pytorch_accuracy)
echo "Cohort's test accuracy with the imported weights: $ours (PyTorch's: $theirs)"
/usr/bin/python3 -c "import sys; sys.exit(0 if '$ours' and abs(float('$ours') - $theirs) <= 0.002 and $theirs > 0.8 else 1)" \
  || { echo "the imported weights score '$ours', PyTorch's $theirs"; exit 1; }

status=0
timeout 60 "$mpiexec" "$np_flag" 1 "$train" --mode=local --model=mlp --hidden=64 --print_cluster=false \
  --warm_start_from=untransposed.safetensors --train_steps=1 > untransposed.log 2>&1 || status=$?
cat untransposed.log
((status != 0)) || { echo "a kernel in PyTorch's layout was taken"; exit 1; }
grep -qF "hidden1/kernel is [64, 784] in the checkpoint but [784, 64] in the model (transpose it: a dense kernel is [inputs, outputs], PyTorch's Linear weight [outputs, inputs])" untransposed.log \
  || { echo "no one-line refusal naming the layout"; exit 1; }
# The CNN, on a Fashion-MNIST of 3000 training and 2000 test images (IDX files of their own).
PYTHONPATH="$here/../support" /usr/bin/python3 - "$data_dir" <<'PY'
import json, os, struct, sys
import numpy as np
import torch
from fashion_mnist import first

torch.manual_seed(0)
torch.set_num_threads(2)
os.makedirs("small", exist_ok=True)
sets = {}
for prefix, n in (("train", 3000), ("t10k", 2000)):
    images, labels = first(sys.argv[1], prefix, n)
    open(f"small/{prefix}-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes())
    open(f"small/{prefix}-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + labels.tobytes())
    sets[prefix] = (torch.from_numpy((images / 255.0).astype(np.float32)).reshape(n, 1, 28, 28),
                    torch.from_numpy(labels.astype(np.int64)))
nn = torch.nn
model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.5), nn.Linear(1024, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = sets["train"]
for epoch in range(2):
    order = torch.randperm(3000)
    for i in range(0, 3000, 64):
        batch = order[i:i + 64]
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        optimizer.step()
model.eval()
with torch.no_grad():
    tx, ty = sets["t10k"]
    accuracy = (model(tx).argmax(1) == ty).float().mean().item()
w = {name: p.detach() for name, p in model.state_dict().items()}
fc1 = w["7.weight"].reshape(1024, 64, 7, 7).permute(0, 2, 3, 1).reshape(1024, 64 * 7 * 7)
tensors = {
    "conv1/kernel": w["0.weight"].permute(2, 3, 1, 0), "conv1/bias": w["0.bias"],
    "conv2/kernel": w["3.weight"].permute(2, 3, 1, 0), "conv2/bias": w["3.bias"],
    "fc1/kernel": fc1.t(), "fc1/bias": w["7.bias"],
    "logits/kernel": w["10.weight"].t(), "logits/bias": w["10.bias"],
}
header, data = {}, b""
for name, t in tensors.items():
    raw = t.contiguous().numpy().astype(np.float32).tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open("cnn.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + data)
print(f"PyTorch's CNN: test accuracy {accuracy:.4f} on 2000 images")
open("pytorch_cnn_accuracy", "w").write(f"{accuracy:.4f}\n")
PY
status=0
timeout 120 "$mpiexec" "$np_flag" 1 "$train" --mode=local --model=cnn --data_dir=small --print_cluster=false \
  --warm_start_from=cnn.safetensors --train_steps=1 --optimizer=sgd --learning_rate=1e-30 \
  --log_every_steps=0 > cnn.log 2>&1 || status=$?
cat cnn.log
((status == 0)) || { echo "the warm-started CNN job failed (status $status)"; exit 1; }
ours=$(sed -nE 's/^final: global step 1, test accuracy ([0-9.]+),.*/\1/p' cnn.log)
theirs=$(cat pytorch_cnn_accuracy)
echo "Cohort's CNN with the imported weights: test accuracy $ours (PyTorch's: $theirs)"
/usr/bin/python3 -c "import sys; sys.exit(0 if '$ours' and abs(float('$ours') - $theirs) <= 0.002 and $theirs > 0.7 else 1)" \
  || { echo "the imported CNN scores '$ours', PyTorch's $theirs"; exit 1; }
echo "import weights test passed"
