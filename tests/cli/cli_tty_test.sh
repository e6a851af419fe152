#!/usr/bin/env bash
# Progress lines (docs/cli.md): on a terminal only, never with --quiet, never inside JSON on
# stdout. script(1) gives the command a pseudo-terminal. Where none can be made (script missing,
# or no /dev/ptmx in a minimal container) the test exits 77, which CTest reports as skipped, with
# the reason; with NCERT_TEST_NO_SKIP=1 (CI, whose machines have one) that is a failure instead.
# Usage: cli_tty_test.sh NCERT_BINARY SCRATCH_DIR
set -uo pipefail
ncert="$1"
dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
failures=0

skip() {
  if [[ "${NCERT_TEST_NO_SKIP:-}" == 1 ]]; then
    echo "FAIL: $1 (NCERT_TEST_NO_SKIP=1: this machine must have it)"
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
command -v script >/dev/null || skip "script(1) is missing (util-linux): no pseudo-terminal to run ncert on"
script -qec true /dev/null >"$dir/probe.txt" 2>&1 ||
  skip "no pseudo-terminal can be created here: $(head -c 200 "$dir/probe.txt")"

"$ncert" demo --dir "$dir/demo" --quiet >/dev/null 2>&1 || { echo "FAIL: ncert demo"; exit 1; }

# NCERT_PROGRESS_DELAY=0 draws the progress line at once (the default waits 1 s).
NCERT_PROGRESS_DELAY=0 script -qec "'$ncert' compare '$dir/demo/logits-a.h5' '$dir/demo/logits-b.h5' --policy kl:1e-5" /dev/null >"$dir/tty.txt" 2>&1
# A line per block at most four times a second: the first block's line is drawn, later ones
# within the quarter second are not, so any rows count qualifies.
if grep -Eq $'\033\[Kncert compare greedy: rows [0-9]+/64 \\([0-9]+%\\)' "$dir/tty.txt"; then echo "ok:   progress on a terminal"; else
  echo "FAIL: no progress line on a terminal"; cat -v "$dir/tty.txt" | sed 's/^/  | /' | head; failures=$((failures + 1)); fi
NCERT_PROGRESS_DELAY=0 script -qec "'$ncert' compare '$dir/demo/logits-a.h5' '$dir/demo/logits-b.h5' --policy kl:1e-5 --quiet" /dev/null >"$dir/tty.txt" 2>&1
if ! grep -Eq "rows [0-9]+/64" "$dir/tty.txt"; then echo "ok:   no progress with --quiet"; else
  echo "FAIL: progress printed with --quiet"; failures=$((failures + 1)); fi
NCERT_PROGRESS_DELAY=0 script -qec "'$ncert' compare '$dir/demo/logits-a.h5' '$dir/demo/logits-b.h5' --policy kl:1e-5 --json -" /dev/null >"$dir/tty.txt" 2>/dev/null
# The terminal shows stderr and stdout together: the progress line is erased before the JSON
# starts, and the JSON after it parses whole.
if python3 -c "import json,re,sys; t=open('$dir/tty.txt').read(); i=t.index('{'); json.loads(t[i:]); sys.exit(re.search(r'rows [0-9]+/64', t[i:]) is not None)" 2>/dev/null
then echo "ok:   no progress inside JSON on stdout"; else
  echo "FAIL: progress mixed into the JSON"; failures=$((failures + 1)); fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all terminal checks passed"
