#!/usr/bin/env bash
# CI's check of the GPT example under mpirun, 4 processes: P = 4 writes exactly the losses of 1F1B
# on one thread; P = 2 x D = 2 under 1F1B and ZB-V write the same losses as each other, and end
# within float rounding of one rank's (two replicas add their gradients as two partial sums); a
# P = 2 x D = 2 run stopped at step 20 and resumed to 40 under another schedule writes the
# uninterrupted run's losses; a combination not compiled in exits with code 2 and one line.
# Usage: check_mpi.sh GPT_BINARY TEXT MPIEXEC [MPIEXEC_ARGS...] NUMPROC_FLAG
set -euo pipefail
gpt=$1 text=$2
shift 2
launch=("$@" 4)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--text "$text" --steps 40 --warmup 5 --eval-every 10 --dropout 100 --sample 20 --quiet)
"$gpt" "${args[@]}" --schedule 1f1b --ranks 1 --losses "$work/ref.txt" > /dev/null
"${launch[@]}" "$gpt" "${args[@]}" --schedule 1f1b --ranks 4 --losses "$work/p4.txt" > /dev/null
cmp -s "$work/ref.txt" "$work/p4.txt" || { echo "P = 4 under mpirun differs from 1 rank"; exit 1; }
echo "1f1b, P = 4 x D = 1 (4 processes): 40 steps bitwise equal to 1 rank on threads"
"${launch[@]}" "$gpt" "${args[@]}" --schedule 1f1b --ranks 2 --losses "$work/d2.txt" > /dev/null
"${launch[@]}" "$gpt" "${args[@]}" --schedule zb-v --ranks 2 --losses "$work/d2v.txt" > /dev/null
cmp -s "$work/d2.txt" "$work/d2v.txt" || { echo "P = 2 x D = 2: 1f1b and zb-v differ"; exit 1; }
last() { awk '$1 == 40 { print $3 }' "$1"; }
python3 - "$(last "$work/ref.txt")" "$(last "$work/d2.txt")" <<'PY'
import sys
a, b = (float.fromhex(x) for x in sys.argv[1:3])
if abs(a - b) > 1e-5 * abs(a):
    sys.exit(f"P = 2 x D = 2 ends at validation loss {b}, 1 rank at {a}: further apart than rounding")
print(f"1f1b and zb-v, P = 2 x D = 2: bitwise equal to each other; validation loss {b:.7f} against 1 rank's {a:.7f}")
PY
"${launch[@]}" "$gpt" "${args[@]}" --schedule zb-v --ranks 2 --checkpoint "$work/ck.safetensors" \
  --checkpoint-every 20 --stop-after 20 --losses "$work/resumed.txt" > /dev/null
"${launch[@]}" "$gpt" "${args[@]}" --schedule 1f1b --ranks 2 --checkpoint "$work/ck.safetensors" --resume \
  --losses "$work/resumed.txt" > /dev/null
cmp -s "$work/d2.txt" "$work/resumed.txt" || { echo "resumed run under mpirun differs"; exit 1; }
echo "P = 2 x D = 2: stopped at 20 (zb-v), resumed to 40 (1f1b): bitwise equal to the run that never stopped"
rc=0
"${launch[@]}" "$gpt" --text "$text" --schedule zb-h1 --ranks 2 > /dev/null 2> "$work/err.txt" || rc=$?
# (mpirun adds lines of its own after the program's one line)
[ "$rc" = 2 ] && [ "$(grep -c '^gpt: ' "$work/err.txt")" = 1 ] ||
  { echo "zb-h1 under mpirun: exit $rc, want 2 and one line"; cat "$work/err.txt"; exit 1; }
echo "a combination not compiled in: exit code 2, one line: $(grep '^gpt: ' "$work/err.txt")"
echo "gpt example under mpirun: P = 4 bitwise, P = 2 x D = 2 bitwise across schedules and resume"
