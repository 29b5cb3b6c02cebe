#!/usr/bin/env bash
# A character-level language model on real text (apps/examples/language_model.cc), 2 workers in
# allreduce mode: seven licenses every Debian system holds (/usr/share/common-licenses, 118 kB),
# the last tenth held out. Next-token prediction with a class index per step (sparse categorical
# cross-entropy), a causal Transformer of 2 blocks, 500 steps:
# - the held-out perplexity must be at most 0.4 of a unigram model's over the same characters
#   (counted here from the training part; measured 28.7, so a bar near 11.5; the model: 7.9
#   after 300 steps, 5.5 after 600);
# - the checkpoint then writes 120 characters after a prompt without training data, with the
#   flags it recorded, and the same seed writes the same characters;
# - resuming on a text of another vocabulary, and a job with nothing to train on or to write
#   with, are refused in one line.
#
#   language_model_test.sh PROGRAM MPIEXEC NP_FLAG WORKDIR
set -euo pipefail
program=$1 mpiexec=$2 np_flag=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cd "$work"
licenses=/usr/share/common-licenses
cat "$licenses"/{Apache-2.0,Artistic,GFDL-1.3,GPL-3,MPL-2.0,LGPL-3,GPL-2} > corpus.txt

. "$here/example_jobs.sh"

run_job "$program" train 2 --train=corpus.txt --train_steps=500 --dropout=0.1 --checkpoint_dir=ckpt \
  --metrics_json=train.json \
  || { echo "the training job failed"; exit 1; }
perplexity=$(json_value train.json perplexity)
unigram=$(/usr/bin/python3 - <<'PY'
import collections, math
text = open("corpus.txt", encoding="utf-8").read()
held = int(len(text) * 0.1)
seen, ahead = text[: len(text) - held], text[len(text) - held :]
counts = collections.Counter(seen)
# A character the training part lacks counts as half an occurrence (the model sees it as unknown).
print(math.exp(-sum(math.log(counts.get(c, 0.5) / len(seen)) for c in ahead) / len(ahead)))
PY
)
echo "held-out perplexity $perplexity, a unigram model's $unigram"
at_most "$perplexity" "0.4 * $unigram" || { echo "train: perplexity $perplexity above 0.4 of $unigram"; exit 1; }

for n in 1 2; do
  run_job "$program" generate$n 1 --checkpoint_dir=ckpt --generate=120 --prompt="This License " --seed=5 \
    || { echo "the generation job failed"; exit 1; }
done
# The characters after the prompt (line feeds among them), to the line end the program adds.
written() { /usr/bin/python3 -c "import sys; t = open(sys.argv[1]).read(); print(repr(t[t.index('generated: This License ') + 24 : -1]))" "$1"; }
/usr/bin/python3 -c "import ast, sys; sys.exit(0 if len(ast.literal_eval(sys.argv[1])) == 120 else 1)" "$(written generate1.log)" \
  || { echo "generate: not 120 characters after the prompt: $(written generate1.log)"; exit 1; }
[[ "$(written generate1.log)" == "$(written generate2.log)" ]] \
  || { echo "generate: the same seed wrote other characters"; exit 1; }

# Resuming on a text of other characters (another vocabulary) is refused.
printf 'xyz\n%.0s' {1..200} > other.txt
expect_job_failure "$program" other_text \
  "--train=other.txt: its vocabulary is not the one the checkpoints in ckpt were trained with \(ckpt/vocabulary.txt\)" \
  "0" --train=other.txt --checkpoint_dir=ckpt --sequence_length=8
expect_job_failure "$program" nothing \
  "--train is required \(or --generate with --checkpoint_dir, to write with a trained model\)" "0 1 2"
echo "language model test passed"
