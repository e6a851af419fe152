#!/usr/bin/env bash
# Packaging: install this build into a fresh prefix and use it only from there, as an engine
# team would. A consumer project (consumer/) finds the package with find_package(ncert CONFIG),
# builds against the installed headers and static libraries, and writes a verify step through
# the installed dump writers; the installed `ncert check` must pass it, and fail the same step
# with one planted bit. The installed Python package writes a dump the installed binary passes.
#
# Usage: packaging_test.sh CMAKE BUILD_DIR SCRATCH_DIR PYTHON GENERATOR CXX [CONSUMER_FLAGS]
#   PYTHON: the interpreter the install targets (Debian's /usr/bin/python3)
#   CONSUMER_FLAGS: compile and link flags for the consumer (the sanitizers of this build)
set -uo pipefail
cmake="$1" build="$2" dir="$3" python="$4" generator="$5" cxx="$6" flags="${7:-}"
here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(dirname "$(dirname "$here")")"
prefix="$dir/prefix"
rm -rf "$dir" && mkdir -p "$dir"
failures=0

ok() { echo "ok:   $1"; }
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }
run() {  # run LOG DESCRIPTION -- command...: the command must exit 0; its output goes to LOG
  local log="$1" what="$2"
  shift 3
  if "$@" >"$log" 2>&1; then ok "$what"; else fail "$what (exit $?)"; tail -n 30 "$log" | sed 's/^/  | /'; return 1; fi
}
expect() {  # expect CODE LOG DESCRIPTION -- command...
  local want="$1" log="$2" what="$3"
  shift 4
  "$@" >"$log" 2>&1
  local got=$?
  if [[ "$got" == "$want" ]]; then ok "$what (exit $got)"; else fail "$what: exit $got, expected $want"; tail -n 30 "$log" | sed 's/^/  | /'; fi
}
json_has() {  # json_has FILE PYTHON-EXPRESSION DESCRIPTION
  if "$python" -c "import json,sys; r=json.load(open('$1')); sys.exit(0 if ($2) else 1)"; then ok "$3"; else fail "$3"; fi
}
finish() {
  if ((failures)); then echo "$failures packaging check(s) failed"; exit 1; fi
  echo "packaging: all checks passed"
  exit 0
}

# 1. Install.
run "$dir/install.log" "cmake --install into $prefix" -- "$cmake" --install "$build" --prefix "$prefix" || finish
for f in bin/ncert include/ncert/reference/dtype.h include/ncert/reference/status.h \
         include/ncert/packing/pack_plan.h include/ncert/certify/io/dump_writer.h include/ncert/certify/io/dump_builder.h \
         include/ncert/certify/io/dump_reader.h share/doc/ncert/README.md; do
  [[ -e "$prefix/$f" ]] || fail "installed $f"
done
[[ -x "$prefix/bin/ncert" ]] && ok "bin/ncert is executable" || fail "bin/ncert is executable"
config="$(find "$prefix" -name ncertConfig.cmake)"
[[ -n "$config" ]] && ok "ncertConfig.cmake at ${config#"$prefix"/}" || fail "ncertConfig.cmake installed"
[[ -z "$(find "$prefix" -path '*/detail/*' -o -name '*.cc' -o -name __pycache__)" ]] \
  && ok "no detail/ headers, sources or __pycache__ installed" || fail "no detail/ headers, sources or __pycache__ installed"
# Relocatable: the package files name no path of the source or build tree (nor the prefix).
if grep -rqF -e "$source_dir" -e "$build" "$(dirname "$config")"; then
  fail "the package files are relocatable"; grep -rnF -e "$source_dir" -e "$build" "$(dirname "$config")" | head -5
else
  ok "the package files are relocatable"
fi

# The Python package lies where the interpreter looks under a prefix: with Debian's python3 and
# the prefix /usr/local, a folder on its default sys.path (no PYTHONPATH needed).
package="$(find "$prefix" -type d -name ncert_dump)"
python_dir="$(dirname "${package#"$prefix"/}")"
[[ -f "$package/__init__.py" ]] && ok "ncert_dump installed in $python_dir" || fail "ncert_dump installed (found: '$package')"
if "$python" -c "import sysconfig; assert 'deb_system' in sysconfig.get_scheme_names()" 2>/dev/null; then
  "$python" -c "import sys; sys.exit(0 if '/usr/local/$python_dir' in sys.path else 1)" \
    && ok "Debian's $python searches /usr/local/$python_dir" || fail "Debian's $python searches /usr/local/$python_dir"
fi

# 2. A consumer project against the prefix alone.
consumer_args=(-S "$here/consumer" -B "$dir/consumer" -G "$generator" -DCMAKE_BUILD_TYPE=Release
               -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix")
if [[ -n "$flags" ]]; then consumer_args+=(-DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"); fi
run "$dir/consumer-configure.log" "consumer configures with find_package(ncert CONFIG REQUIRED)" -- "$cmake" "${consumer_args[@]}" || finish
grep -q "^ncert_DIR:PATH=$(dirname "$config")$" "$dir/consumer/CMakeCache.txt" \
  && ok "the consumer found the package in the prefix" || fail "the consumer found the package in the prefix"
[[ "$(cat "$dir/consumer/ncert_cli.txt")" == "$prefix/bin/ncert" ]] \
  && ok "ncert::cli is the installed binary" || fail "ncert::cli is the installed binary: $(cat "$dir/consumer/ncert_cli.txt")"
run "$dir/consumer-build.log" "consumer builds: export_step, readme_example and every installed header" -- "$cmake" --build "$dir/consumer" || finish

# 3. The C++ export, certified by the installed binary, both ways.
run "$dir/export.log" "export_step writes a dump through the installed writer" -- "$dir/consumer/export_step" "$dir/cpp.h5"
expect 0 "$dir/check-cpp.log" "installed ncert check passes the C++ dump" -- "$prefix/bin/ncert" check "$dir/cpp.h5" --json "$dir/cpp.json"
json_has "$dir/cpp.json" \
  "r['verdict']=='PASS' and {c['kind'] for c in r['checks'] if c['verdict']=='PASS'} >= {'schema','geometry','identity','bound','walk','untouched','vacuity','witness'}" \
  "every projection check and the witness ran and passed on the C++ dump"
run "$dir/export-fault.log" "export_step writes the same step with one flipped bit" -- "$dir/consumer/export_step" "$dir/cpp-fault.h5" --plant-fault
expect 1 "$dir/check-fault.log" "installed ncert check fails the planted bit" -- "$prefix/bin/ncert" check "$dir/cpp-fault.h5" --json "$dir/cpp-fault.json"
json_has "$dir/cpp-fault.json" "r['verdict']=='FAIL' and any(c['kind']=='identity' and c['verdict']=='FAIL' for c in r['checks'])" \
  "the planted bit fails the identity check"

# The same step through the installed typed writer (DumpBuilder): the same checks pass, and the
# same planted bit fails identity.
run "$dir/export-typed.log" "export_step --typed writes the step through the installed DumpBuilder" -- "$dir/consumer/export_step" "$dir/cpp-typed.h5" --typed
expect 0 "$dir/check-typed.log" "installed ncert check passes the typed C++ dump" -- "$prefix/bin/ncert" check "$dir/cpp-typed.h5" --json "$dir/cpp-typed.json"
json_has "$dir/cpp-typed.json" \
  "r['verdict']=='PASS' and {c['kind'] for c in r['checks'] if c['verdict']=='PASS'} >= {'schema','geometry','identity','bound','walk','untouched','vacuity','witness'}" \
  "every projection check and the witness ran and passed on the typed C++ dump"
run "$dir/export-typed-fault.log" "export_step --typed writes the step with one flipped bit" -- "$dir/consumer/export_step" "$dir/cpp-typed-fault.h5" --typed --plant-fault
expect 1 "$dir/check-typed-fault.log" "installed ncert check fails the planted bit in the typed dump" -- "$prefix/bin/ncert" check "$dir/cpp-typed-fault.h5" --json "$dir/cpp-typed-fault.json"
json_has "$dir/cpp-typed-fault.json" "r['verdict']=='FAIL' and any(c['kind']=='identity' and c['verdict']=='FAIL' for c in r['checks'])" \
  "the planted bit fails the identity check of the typed dump"

run "$dir/readme.log" "README.md's C++ example writes a logits run" -- "$dir/consumer/readme_example" "$dir/readme.h5"
expect 0 "$dir/check-readme.log" "installed ncert check passes it" -- "$prefix/bin/ncert" check "$dir/readme.h5" --json "$dir/readme.json"
json_has "$dir/readme.json" "r['verdict']=='PASS' and any(c['id']=='logits/greedy/witness' and c['verdict']=='PASS' for c in r['checks'])" \
  "its witness check ran and passed"

# 4. The installed Python package, from the prefix only (sys.path[0] is the scratch folder).
cat >"$dir/write_dump.py" <<'PY'
import sys
import numpy as np
import ncert_dump
from ncert_dump import DumpWriter, Segment, bf16_from_f32, f32_from_bf16

prefix, out = sys.argv[1], sys.argv[2]
assert ncert_dump.__file__.startswith(prefix + "/"), ncert_dump.__file__
rng = np.random.default_rng(7)
x = bf16_from_f32(rng.standard_normal((4, 64)))
w = bf16_from_f32(rng.standard_normal((32, 64)) / 8)
y = f32_from_bf16(x).astype(np.float64) @ f32_from_bf16(w).astype(np.float64).T
with DumpWriter(out, engine="packaging-python", build="installed ncert_dump") as dw:
    dw.add_projection("q", x=x, x_dtype="bf16", weights=[Segment("bf16", 0, 32, values=w)], accumulator="f32-rn",
                      output_dtype="bf16", selector=np.arange(4, dtype=np.int32),
                      y_unpacked=bf16_from_f32(y))
    logits = rng.standard_normal((3, 100)).astype(np.float32)
    dw.add_logits_run("greedy", tokens=logits.argmax(axis=1).astype(np.int32), logits=logits)
print(f"ncert_dump {ncert_dump.__version__} from {ncert_dump.__file__} wrote {out}")
PY
run "$dir/python.log" "installed ncert_dump imports from the prefix and writes a dump" -- \
  env PYTHONPATH="$prefix/$python_dir" "$python" "$dir/write_dump.py" "$prefix" "$dir/py.h5"
expect 0 "$dir/check-py.log" "installed ncert check passes the Python dump" -- "$prefix/bin/ncert" check "$dir/py.h5" --json "$dir/py.json"
json_has "$dir/py.json" "r['verdict']=='PASS' and {c['kind'] for c in r['checks'] if c['verdict']=='PASS'} >= {'schema','bound','witness'}" \
  "the bound and witness checks ran and passed on the Python dump"

finish
