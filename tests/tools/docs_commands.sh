#!/usr/bin/env bash
# Runs every command shown in README.md and docs/*.md (the lines of their ```sh blocks) as a reader
# would after scripts/quickstart.sh, on the files the repository ships (samples/): each must exit 0.
# Paths build/quickstart/bin/ are this build's binaries. Skipped, and said so: the two set-up
# commands (they are the test suite and the quickstart themselves), build commands (this build made
# the targets), and mpirun lines, with or without Open MPI's variables before them (CTest runs the
# same programs under mpirun as example.mpi_mlp and example.gpt_mpi). A command shown on two pages
# runs once.
# Usage: docs_commands.sh BIN_DIR SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ln -s "$src/samples" "$work/samples"
ran=0
failed=0
declare -A seen
for doc in "$src/README.md" "$src"/docs/*.md; do
  # The lines of ```sh blocks, with continued lines joined.
  while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    case "$cmd" in
      "bash scripts/"* | "cmake --build"* | mpirun* | OMPI_*" mpirun "*)
        echo "skipped ($(basename "$doc")): $cmd"
        continue
        ;;
      build/quickstart/bin/*) ;;
      *)
        echo "FAILED ($(basename "$doc")): not a command this test knows how to run: $cmd"
        failed=$((failed + 1))
        continue
        ;;
    esac
    if [[ -n "${seen[$cmd]:-}" ]]; then  # shown twice (README.md and a page): run once
      echo "ran before ($(basename "$doc")): $cmd"
      continue
    fi
    seen[$cmd]=1
    run="${cmd//build\/quickstart\/bin\//$bin/}"
    if (cd "$work" && eval "$run") >"$work/out" 2>&1; then
      ran=$((ran + 1))
      echo "ran ($(basename "$doc")): $cmd"
    else
      failed=$((failed + 1))
      echo "FAILED ($(basename "$doc")): $cmd"
      head -5 "$work/out"
    fi
  done < <(awk '/^```(sh|bash)$/{f=1;next} /^```/{f=0} f' "$doc" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | sed 's/ *#.*$//')
done
echo "$ran commands ran, $failed failed"
[ "$failed" = 0 ] && [ "$ran" -gt 0 ]
