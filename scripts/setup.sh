#!/usr/bin/env bash
# Installs what ctpipe needs from Debian's packages, if anything is missing.
set -euo pipefail
pkgs=(cmake make g++ clang libclang-rt-14-dev libboost-dev doctest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin libblas-dev libopenblas-dev fortunes python3-numpy)
# `bash scripts/setup.sh bench` also installs what only the benchmarks use: CBC, the MILP solver of
# bench/synthesis_ilp.sh.
if [ "${1:-}" = bench ]; then pkgs+=(coinor-cbc); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ctpipe setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
