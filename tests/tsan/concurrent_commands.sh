#!/usr/bin/env bash
# ncert's own concurrent paths under ThreadSanitizer (the tsan preset; tests/tsan/CMakeLists.txt):
#   - `ncert demo` and `ncert check --threads 2`: the OpenMP kernels and the supervised child with
#     its watchdog (certify/isolation) in every command;
#   - `ncert campaign --workers 2 --threads 2`: the scheduler handing items to two worker
#     processes, each a supervised, two-thread command; and `--resume` of the finished journal.
# Every process writes its TSan reports to report.PID in the scratch dir (log_path): a report
# in any of them, the campaign's children included, fails the test, as does an unexpected exit.
#
#   concurrent_commands.sh NCERT SCRATCH_DIR
set -uo pipefail
ncert=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
export TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$dir/tsan-report"
failed=0

expect() {  # expect RC COMMAND...: runs the command, fails the test on another exit code
  local want=$1
  shift
  n=$((n + 1))
  "$@" >"out.$n" 2>&1
  local rc=$?
  if ((rc != want)); then
    echo "FAIL: exit $rc, expected $want: $*"
    cat "out.$n"
    failed=1
  fi
}
n=0

expect 0 "$ncert" demo --dir . --quiet --threads 2
expect 0 "$ncert" check good.h5 --threads 2 --quiet
cat >campaign.json <<'JSON'
{"ncert_campaign": 1,
 "entries": [{"id": "good", "check": "good.h5"},
             {"id": "swapped", "check": "slots-swapped.h5"},
             {"id": "scale", "check": "af4-scale-x2.h5"},
             {"id": "logits", "compare": ["logits-a.h5", "logits-b.h5"], "policy": "ulp:4"},
             {"id": "forks", "forks": ["fork-near-tie-a.h5", "fork-near-tie-b.h5"]}]}
JSON
# Two faulty dumps among the entries: the campaign's verdict is FAIL (exit 1).
expect 1 "$ncert" campaign campaign.json --workers 2 --threads 2 --quiet --json campaign-report.json
expect 1 "$ncert" campaign campaign.json --workers 2 --threads 2 --quiet --resume --json resumed.json

if compgen -G "tsan-report.*" >/dev/null; then
  echo "FAIL: ThreadSanitizer reported:"
  cat tsan-report.*
  failed=1
fi
((failed == 0)) && echo "no ThreadSanitizer report in $n commands (the campaign's workers included)"
exit $failed
