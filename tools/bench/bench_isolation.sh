#!/usr/bin/env bash
# The cost of isolation: `ncert check DUMP` in a supervised child (the default) against the same
# command in-process (NCERT_ISOLATION=off), run alternately so both see the same machine load.
# Prints each run, the medians and their ratio (docs/performance.md "Isolation").
#
#   tools/bench/bench_isolation.sh build/release/certify/ncert /work/bench-data/qwen-mixer-4.h5 [runs=7]
set -euo pipefail
ncert=${1:?usage: bench_isolation.sh NCERT DUMP [RUNS]}
dump=${2:?usage: bench_isolation.sh NCERT DUMP [RUNS]}
runs=${3:-7}

time_one() {  # prints wall seconds of one run
  local start end
  start=$(date +%s.%N)
  env "$@" "$ncert" check "$dump" --quiet >/dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f\n", b - a}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

on=() off=()
time_one NCERT_ISOLATION=on >/dev/null  # warm the page cache
for ((i = 1; i <= runs; i++)); do
  t_off=$(time_one NCERT_ISOLATION=off)
  t_on=$(time_one NCERT_ISOLATION=on)
  off+=("$t_off") on+=("$t_on")
  printf 'run %d: in-process %.3f s, isolated %.3f s\n' "$i" "$t_off" "$t_on"
done
m_off=$(printf '%s\n' "${off[@]}" | median)
m_on=$(printf '%s\n' "${on[@]}" | median)
printf 'median: in-process %.3f s, isolated %.3f s, ratio %.4f (target < 1.05)\n' "$m_off" "$m_on" \
  "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN {print a / b}')"
