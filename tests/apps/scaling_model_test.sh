#!/usr/bin/env bash
# The cost model's check table, as scripts/scaling_model.py computes it from the measurements it
# holds, must be the one docs/SCALING.md shows, row for row: a change to either shows here.
#
#   scaling_model_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
table=$(/usr/bin/python3 "$source_dir/scripts/scaling_model.py" --check | grep '^|')
rows=$(wc -l <<<"$table")
((rows >= 4)) || { echo "FAIL: the script printed $rows table lines"; echo "$table"; exit 1; }
while IFS= read -r line; do
  grep -qxF -- "$line" "$source_dir/docs/SCALING.md" ||
    { echo "FAIL: docs/SCALING.md lacks the script's line: $line"; exit 1; }
done <<<"$table"
echo "the $rows lines of the model's check table are the page's"
