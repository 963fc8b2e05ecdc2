#!/usr/bin/env bash
# gpt_gpu's bad options (checked before it looks for a GPU, so here too): each refused with exit
# code 2 and one line.
#   bash check_gpu_options.sh GPT_GPU
set -uo pipefail
gpu=$1
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for bad in "--precision bf17" "--launch later" "--schedule gpipe" "--dump start.bin" "--dump start.bin --min-tokens 64 --dropout 100" "--resume"; do
  rc=0
  # shellcheck disable=SC2086  # (each case is several words)
  "$gpu" $bad >/dev/null 2>"$err" || rc=$?
  if [ "$rc" != 2 ] || [ "$(wc -l <"$err")" != 1 ]; then
    echo "gpt_gpu $bad: exit $rc, want 2 and one line"
    cat "$err"
    exit 1
  fi
done
echo "gpt_gpu: bad options refused, exit code 2 with one line each"
