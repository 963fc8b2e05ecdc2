#!/usr/bin/env bash
# CI's check of the GPT example on a small text: every schedule and depth it compiles trains the
# same 40 steps (dropout on, microbatches of mixed lengths) and writes the same losses as 1F1B on
# one rank, bit for bit; the validation loss falls below a fixed bound; a run stopped at step 20
# and resumed from its checkpoint writes the losses of the run that never stopped; bad options
# exit with code 2; --write-model writes a model file that ctpipe plan reads.
# Usage: check.sh GPT_BINARY TEXT
set -euo pipefail
gpt=$1 text=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--text "$text" --steps 40 --warmup 5 --eval-every 10 --dropout 100 --sample 40 --quiet)
"$gpt" "${args[@]}" --schedule 1f1b --ranks 1 --losses "$work/ref.txt" > "$work/ref.out"
val=$(sed -n 's/^trained: 40 steps, validation loss //p' "$work/ref.out")
awk -v v="$val" 'BEGIN { if (!(v < 3.2)) { print "validation loss " v " is not below 3.2"; exit 1 } }'
echo "1f1b, 1 rank: validation loss $val (from ln 96 = 4.56)"
for run in "1f1b 2" "1f1b 4" "interleaved 2" "zb-h1 2" "zb-h1 4" "zb-v 2" "dualpipe-v 2"; do
  set -- $run
  "$gpt" "${args[@]}" --schedule "$1" --ranks "$2" --losses "$work/run.txt" > /dev/null
  cmp -s "$work/ref.txt" "$work/run.txt" || { echo "$1 on $2 ranks: losses differ from 1 rank's"; diff "$work/ref.txt" "$work/run.txt" | head; exit 1; }
  echo "$1, $2 ranks: 40 steps bitwise equal to 1 rank"
done
# Stop at step 20 with a checkpoint (ZB-V, 2 ranks), then resume to 40 (1F1B, 4 ranks).
"$gpt" "${args[@]}" --schedule zb-v --ranks 2 --checkpoint "$work/ck.safetensors" --checkpoint-every 20 \
  --losses "$work/resumed.txt" --stop-after 20 > /dev/null
"$gpt" "${args[@]}" --schedule 1f1b --ranks 4 --checkpoint "$work/ck.safetensors" --resume \
  --losses "$work/resumed.txt" > /dev/null
cmp -s "$work/ref.txt" "$work/resumed.txt" || { echo "resumed run differs"; diff "$work/ref.txt" "$work/resumed.txt" | head; exit 1; }
echo "stopped at 20 (ZB-V, 2 ranks), resumed to 40 (1F1B, 4 ranks): bitwise equal to the run that never stopped"
# The planner's model file: every layer measured at 4 sizes, the tied head and the residuals named,
# the stages of 1F1B on 2 ranks as measured (its calibration);
# ctpipe plan (beside the example, where it is built) reads it.
"$gpt" --text "$text" --write-model "$work/model.json" > /dev/null
[ "$(grep -c '"timings": \[' "$work/model.json")" = 28 ] || { echo "model file: want 28 timed layers"; exit 1; }
grep -A1 '"name": "head"' "$work/model.json" | grep -q '"shares_with": "embedding"' || { echo "model file: the head is not tied"; exit 1; }
[ "$(grep -c '"skip": 6' "$work/model.json")" = 4 ] || { echo "model file: want 4 residual skips"; exit 1; }
grep -Eq '"calibration": \{"samples": 4, "first_layers": \[0, [0-9]+\]' "$work/model.json" ||
  { echo "model file: no calibration by 1F1B on 2 ranks"; exit 1; }
if [ -x "$(dirname "$gpt")/ctpipe" ]; then
  "$(dirname "$gpt")/ctpipe" plan "$work/model.json" --devices 2 --batch 16 > "$work/plan.txt"
  grep -q "plans for 28 layers on 2 devices" "$work/plan.txt" || { echo "ctpipe plan did not read the model file"; cat "$work/plan.txt"; exit 1; }
fi
echo "--write-model: 28 layers timed at 4 sizes, the tied head, 4 skips, calibrated by 1F1B on 2 ranks; ctpipe plan reads it"
for bad in "--schedule gpipe" "--schedule zb-v --ranks 4" "--steps 0" "--resume"; do
  rc=0
  "$gpt" --text "$text" $bad > /dev/null 2> "$work/err.txt" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < "$work/err.txt")" = 1 ] || { echo "gpt $bad: exit $rc, want 2 and one line"; cat "$work/err.txt"; exit 1; }
done
echo "bad options: exit code 2 with one line each"
echo "gpt example: every schedule bitwise equal, resume bitwise, validation below bound"
