#!/usr/bin/env bash
# Text classification on real text (apps/examples/text.cc), 2 workers in allreduce mode: the
# paragraphs of five licenses every Debian system holds (/usr/share/common-licenses: Apache-2.0,
# Artistic, GFDL-1.3, GPL-3, MPL-2.0; 8 words or more) as a folder of .txt files, a subfolder per
# license, every third paragraph held out to test on (179 to train, 87 to test; the largest
# class, GPL-3, is 39% of the test set). Which license does a paragraph come from?
# - words through 1-D convolutions: test accuracy at least 0.55 (measured 0.64 - 0.74 over
#   seeds), and the vocabulary file the chief writes starts with the padding and unknown ids;
#   the checkpoint then classifies the held-out GPL-3 paragraphs with --predict (at least half
#   called GPL-3; measured 30 of 34), and refuses to resume with other flags or on a folder with another
#   vocabulary;
# - characters through 1-D convolutions: at least 0.65 (measured 0.80), and its checkpoint calls
#   at least half the held-out MPL-2.0 paragraphs MPL-2.0 (measured 14 of 18);
# - the same paragraphs as CSV files (a quoted field holding each paragraph's line breaks), the
#   license by name: at least 0.55, as the folders, and its checkpoint classifies the test file
#   a row at a time (at least half right);
# - --validation_split instead of a test folder trains on the rest of the training folder;
# - a folder without .txt files is refused in one line naming it.
#
#   text_test.sh TEXT MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
text=$1 mpiexec=$2 np_flag=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cd "$work"

/usr/bin/python3 - <<'PY'
import os
import re
for name in ("Apache-2.0", "Artistic", "GFDL-1.3", "GPL-3", "MPL-2.0"):
    with open(f"/usr/share/common-licenses/{name}", encoding="utf-8", errors="replace") as f:
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", f.read()) if len(p.split()) >= 8]
    for i, paragraph in enumerate(paragraphs):
        split = "test" if i % 3 == 2 else "train"
        os.makedirs(f"{split}/{name}", exist_ok=True)
        with open(f"{split}/{name}/{i:04d}.txt", "w", encoding="utf-8") as f:
            f.write(paragraph)
os.makedirs("csv_only/a", exist_ok=True)
open("csv_only/a/x.csv", "w").write("1,2\n")
# The same paragraphs as CSV files, as Python's csv module (and pandas) write them: a row per
# paragraph, its line breaks, commas and quotes inside a quoted field; the license by name.
import csv
for split in ("train", "test"):
    with open(f"{split}.csv", "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["id", "paragraph", "license"])
        for name in sorted(os.listdir(split)):
            for file in sorted(os.listdir(f"{split}/{name}")):
                out.writerow([file, open(f"{split}/{name}/{file}", encoding="utf-8").read(), name])
PY

. "$here/example_jobs.sh"
run() { run_job "$text" "$1" 2 "${@:2}"; }  # run NAME ARGS...: 2 ranks
at_least() {  # at_least NAME FILE BAR
  local value
  value=$(json_value "$2" accuracy)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $value >= $3 else 1)" \
    || { echo "$1: test accuracy $value, expected at least $3"; exit 1; }
  echo "$1: test accuracy $value"
}

run words --train=train --test=test --model=conv1d --embedding_dim=32 --units=128 \
  --train_steps=150 --vocabulary_file=vocabulary.txt --metrics_json=words.json \
  --checkpoint_dir=ckpt || { echo "the word-level job failed"; exit 1; }
grep -q "^text: 2 workers, 179 texts in 5 classes, vocabulary of " words.log \
  || { echo "words: not 179 texts in 5 classes"; exit 1; }
at_least words words.json 0.55
[[ "$(sed -n 1p vocabulary.txt)" == "" && "$(sed -n 2p vocabulary.txt)" == "[UNK]" && \
   "$(sed -n 3p vocabulary.txt)" == "the" ]] \
  || { head -3 vocabulary.txt; echo "words: the vocabulary file does not start with '', [UNK], the"; exit 1; }

# The checkpoint classifies new texts (the held-out GPL-3 paragraphs) without training, with the
# flags it recorded (not the defaults: 32, 128) and the vocabulary and classes kept beside it: as
# many of them called GPL-3 as the test accuracy says.
run predict --checkpoint_dir=ckpt --predict=test/GPL-3 --predictions=gpl3.csv \
  || { echo "the prediction job failed"; exit 1; }
/usr/bin/python3 - <<'PY' || exit 1
import csv, os, sys
rows = list(csv.DictReader(open("gpl3.csv")))
files = len(os.listdir("test/GPL-3"))
called = sum(row["class"] == "GPL-3" for row in rows)
print(f"predict: {called} of {len(rows)} GPL-3 paragraphs called GPL-3")
if len(rows) != files or called < 0.5 * files or not all(0 < float(r["probability"]) <= 1 for r in rows):
    sys.exit(f"predict: {len(rows)} rows for {files} files, {called} called GPL-3")
PY
# A checkpoint's settings (recorded in it) and vocabulary go with it: other flags, or a training
# folder that makes another vocabulary, are refused.
expect_job_failure "$text" other_settings \
  "ckpt, global step 150: its parameters were trained with --embedding_dim=32, this job has --embedding_dim=64: give the same \(or another checkpoint directory\)" \
  "0" --train=train --checkpoint_dir=ckpt --train_steps=300 --units=64
mkdir -p fewer && cp -r train/GPL-3 train/MPL-2.0 fewer/
expect_job_failure "$text" other_vocabulary \
  "--train=fewer: its vocabulary is not the one the checkpoints in ckpt were trained with" "0" \
  --train=fewer --checkpoint_dir=ckpt --train_steps=300 --model=conv1d --embedding_dim=32 --units=128

# The CSV files train as the folders do.
run csv --train=train.csv --test=test.csv --text_column=paragraph --label_column=license \
  --model=conv1d --embedding_dim=32 --units=128 --train_steps=150 --metrics_json=csv.json \
  --checkpoint_dir=ckpt_csv || { echo "the job on CSV files failed"; exit 1; }
grep -q "^text: 2 workers, 179 texts in 5 classes, vocabulary of " csv.log \
  || { echo "csv: not 179 texts in 5 classes"; exit 1; }
at_least csv csv.json 0.55
# Its checkpoint classifies the test file a row at a time, as its test accuracy says.
run predict_csv --checkpoint_dir=ckpt_csv --predict=test.csv --text_column=paragraph \
  --predictions=csv_predictions.csv || { echo "the prediction job on a CSV file failed"; exit 1; }
/usr/bin/python3 - <<'PY' || exit 1
import csv, sys
truth = [row["license"] for row in csv.DictReader(open("test.csv", newline=""))]
rows = list(csv.DictReader(open("csv_predictions.csv", newline="")))
right = sum(r["class"] == t for r, t in zip(rows, truth))
print(f"predict_csv: {right} of {len(rows)} rows right")
if len(rows) != len(truth) or rows[0]["path"] != "test.csv:1" or right < 0.5 * len(truth):
    sys.exit(f"predict_csv: {len(rows)} rows for {len(truth)}, the first {rows[0]['path']}, {right} right")
PY

run characters --train=train --test=test --model=conv1d --split=characters --sequence_length=400 \
  --embedding_dim=16 --units=128 --train_steps=200 --metrics_json=characters.json \
  --checkpoint_dir=ckpt_characters || { echo "the character-level job failed"; exit 1; }
at_least characters characters.json 0.65
# Characters are tokens, line feeds among them: the vocabulary file keeps them (escaped), and
# the character model predicts with it.
run predict_characters --checkpoint_dir=ckpt_characters --predict=test/MPL-2.0 \
  --predictions=mpl.csv || { echo "the character-level prediction job failed"; exit 1; }
[[ $(grep -c ",MPL-2.0," mpl.csv) -ge $(( $(ls test/MPL-2.0 | wc -l) / 2 )) ]] \
  || { cat mpl.csv; echo "predict_characters: fewer than half the MPL-2.0 paragraphs called MPL-2.0"; exit 1; }

run held_out --train=train --validation_split=0.25 --model=conv1d --train_steps=50 \
  || { echo "the job with a validation split failed"; exit 1; }
grep -q "^text: 2 workers, 135 texts in 5 classes" held_out.log \
  || { echo "held_out: the training part is not 135 of the 179 texts"; exit 1; }

# Pre-trained word vectors (word2vec's text format: a header line, then a word and its values a
# line; a word of the vocabulary's and others), held frozen: the trained checkpoint's embedding
# holds each vocabulary word's vector as the file gives it, zeros for words without one.
/usr/bin/python3 - <<'PY'
import numpy as np
words = [line.rstrip("\n") for line in open("vocabulary.txt")][2:]
rng = np.random.default_rng(11)
with open("vectors.txt", "w") as f:
    chosen = words[::2]  # every other word has a vector
    f.write(f"{len(chosen) + 1} 32\n")
    for w in chosen + ["notaword"]:
        f.write(w + " " + " ".join(f"{v:.6f}" for v in rng.normal(size=32)) + "\n")
PY
run word_vectors --train=train --test=test --model=lstm --embedding_dim=32 --units=32 \
  --word_vectors=vectors.txt --freeze_word_vectors --train_steps=30 --checkpoint_dir=ckpt_vectors \
  || { echo "the job with word vectors failed"; exit 1; }
grep -q "^text: [0-9]* of the vocabulary's [0-9]* tokens have a vector in vectors.txt" word_vectors.log \
  || { echo "word_vectors: no count of the tokens found"; exit 1; }
PYTHONPATH="$here/../core/io" /usr/bin/python3 - <<'PY' || exit 1
import glob, sys
import numpy as np
from checkpoint_reader import load
tensors, _ = load(sorted(glob.glob("ckpt_vectors/model.ckpt-*.safetensors"))[-1])
table = tensors["embedding/embeddings"]
vocabulary = [line.rstrip("\n") for line in open("vocabulary.txt")]
vectors = {}
for line in list(open("vectors.txt"))[1:]:
    word, *values = line.split()
    vectors[word] = np.array(values, dtype=np.float32)
for i, word in enumerate(vocabulary):
    expected = vectors.get(word, np.zeros(32, np.float32)) if i >= 2 else np.zeros(32, np.float32)
    if not np.array_equal(table[i], expected):
        sys.exit(f"word_vectors: row {i} ({word!r}) is not the file's vector (or zeros)")
print(f"word_vectors: the {len(vocabulary)} rows after training are the file's vectors")
PY
printf 'the 1 2\n' > short_vectors.txt
expect_job_failure "$text" vector_length \
  "short_vectors.txt: line 1: the vector of 'the' has 2 values, not 32 \(the embedding's dimension\)" \
  "0" --train=train --model=conv1d --embedding_dim=32 --word_vectors=short_vectors.txt
expect_job_failure "$text" freeze_alone \
  "--freeze_word_vectors keeps the vectors of --word_vectors, which is empty" \
  "0 1 2" --train=train --freeze_word_vectors

expect_job_failure "$text" csv_only "csv_only: no \.txt text files in its 1 class subfolders \(a\)" \
  "0 1 2" --train=csv_only
echo "text test passed"
