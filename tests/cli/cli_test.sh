#!/usr/bin/env bash
# CLI contract (cli-contract.md): exit codes 0 pass / 1 fail / 2 usage / 3 refused, and the
# JSON report's required fields. Usage: cli_test.sh NCERT_BINARY SCRATCH_DIR
set -uo pipefail
ncert="$1"
dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
failures=0

expect() {  # expect CODE DESCRIPTION -- command...
  local want="$1" what="$2"
  shift 3
  "$@" >"$dir/out.txt" 2>"$dir/err.txt"
  local got=$?
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: $what: exit $got, expected $want"
    sed 's/^/  | /' "$dir/out.txt" "$dir/err.txt" | head -20
    failures=$((failures + 1))
  else
    echo "ok:   $what (exit $got)"
  fi
}

json_has() {  # json_has FILE PYTHON-EXPRESSION DESCRIPTION
  if python3 -c "import json,sys; r=json.load(open('$1')); sys.exit(0 if ($2) else 1)"; then
    echo "ok:   $3"
  else
    echo "FAIL: $3"
    failures=$((failures + 1))
  fi
}

expect 0 "--version" -- "$ncert" --version
expect 2 "no subcommand is a usage error" -- "$ncert"
expect 2 "unknown flag is a usage error" -- "$ncert" check --no-such-flag x.h5
expect 2 "--threads 0 is a usage error" -- "$ncert" sweep --threads 0
expect 3 "a missing dump is refused" -- "$ncert" check "$dir/missing.h5"
printf 'not hdf5' >"$dir/garbage.h5"
expect 3 "a non-HDF5 file is refused" -- "$ncert" check "$dir/garbage.h5" --json "$dir/refused.json"
json_has "$dir/refused.json" "r['verdict']=='FAIL' and r['error']['name']=='not-hdf5' and r['checks'][0]['kind']=='schema'" \
  "a refused dump still writes a JSON report naming the error"

expect 0 "demo: every fault caught" -- "$ncert" demo --dir "$dir/demo" --json "$dir/demo.json"
json_has "$dir/demo.json" "r['stats']['faults_caught']==r['stats']['faults']==10 and r['stats']['fork_faults_caught']==r['stats']['fork_faults']==2" \
  "demo JSON counts the faults caught"
expect 2 "demo refuses to overwrite its files without --force" -- "$ncert" demo --dir "$dir/demo"
expect 0 "demo --force overwrites" -- "$ncert" demo --dir "$dir/demo" --force --quiet
# The demo's own files are outputs (a review's --json DIR/good.h5 replaced the dump), and it writes
# only regular files of its directory, never through a link (--force replaced ../precious.h5).
mkdir -p "$dir/demo-empty"
expect 2 "demo --json onto one of its own dumps is a path conflict" -- "$ncert" demo --dir "$dir/demo-empty" --json "$dir/demo-empty/good.h5"
grep -q "path-conflict (105)" "$dir/err.txt" && echo "ok:   the conflict is named" || { echo "FAIL: no path-conflict named"; failures=$((failures + 1)); }
# A skip policy is an input: a report over it lost it, empty or not (a review's campaign with
# "skip_policy": "pol.json" and --json pol.json replaced the policy with its refusal).
echo '{"ncert_skip_policy": 1}' > "$dir/policy.json"
expect 2 "check --json onto its --policy is a path conflict" -- "$ncert" check "$dir/demo/good.h5" --policy "$dir/policy.json" --json "$dir/policy.json"
grep -q "path-conflict (105).*(--policy)" "$dir/err.txt" && grep -q ncert_skip_policy "$dir/policy.json" \
  && echo "ok:   the policy is named and kept" || { echo "FAIL: the policy was not protected"; failures=$((failures + 1)); }
: > "$dir/empty-policy.json"
printf '{"ncert_campaign": 1, "skip_policy": "empty-policy.json", "entries": [{"id": "a", "check": "demo/good.h5"}]}' > "$dir/policy-manifest.json"
expect 2 "campaign --json onto its manifest's skip policy is a path conflict" -- "$ncert" campaign "$dir/policy-manifest.json" --json "$dir/empty-policy.json"
grep -q "path-conflict (105)" "$dir/err.txt" && [[ ! -s "$dir/empty-policy.json" ]] \
  && echo "ok:   the manifest's policy is kept" || { echo "FAIL: the manifest's policy was overwritten"; failures=$((failures + 1)); }
echo "a file" > "$dir/demo-file"
expect 2 "demo --dir naming a file is a usage error" -- "$ncert" demo --dir "$dir/demo-file"
mkdir -p "$dir/demo-user" && echo "precious" > "$dir/demo-user/good.h5"
expect 2 "demo --force refuses a file of that name it did not write" -- "$ncert" demo --dir "$dir/demo-user" --force
[[ "$(cat "$dir/demo-user/good.h5")" == precious ]] && echo "ok:   the user's good.h5 is untouched" \
  || { echo "FAIL: demo --force replaced a user's good.h5"; failures=$((failures + 1)); }
mkdir -p "$dir/demo-link" && echo "precious" > "$dir/precious.h5" && ln -sf "$dir/precious.h5" "$dir/demo-link/good.h5"
expect 2 "demo --force refuses a demo file that is a link" -- "$ncert" demo --dir "$dir/demo-link" --force
json_has "$dir/demo.json" "open('$dir/precious.h5').read()=='precious\\n'" "the link's target is untouched"
rm -f "$dir/demo-link/good.h5" && ln -sf "$dir/outside.h5" "$dir/demo-link/good.h5"
expect 2 "demo refuses a dangling link among its files" -- "$ncert" demo --dir "$dir/demo-link"
[[ ! -e "$dir/outside.h5" ]] && echo "ok:   nothing written outside --dir" || { echo "FAIL: the demo wrote through a dangling link"; failures=$((failures + 1)); }

expect 0 "check on a good dump passes" -- "$ncert" check "$dir/demo/good.h5" --json "$dir/good.json"
json_has "$dir/good.json" "r['tool']=='ncert' and r['command']=='check' and r['verdict']=='PASS' and len(r['inputs'][0]['xxh3_128'])==32 and all(set(c)>={'id','kind','verdict','reason','stats'} for c in r['checks'])" \
  "check JSON carries tool, command, inputs with hashes, and id/kind/verdict/reason/stats per check"
json_has "$dir/good.json" "{c['kind'] for c in r['checks']} >= {'schema','geometry','identity','bound','walk','untouched','vacuity'}" \
  "check JSON has every projection check kind"
expect 1 "check on a faulty dump fails" -- "$ncert" check "$dir/demo/wrong-row-scattered.h5" --json "$dir/bad.json"
json_has "$dir/bad.json" "r['verdict']=='FAIL' and any(c['verdict']=='FAIL' and c['kind']=='identity' for c in r['checks'])" \
  "the failing check is the identity check"
expect 1 "--quiet still fails" -- "$ncert" check "$dir/demo/nan-output.h5" --quiet
grep -q "^FAIL" "$dir/out.txt" && ! grep -q "^PASS" "$dir/out.txt" && echo "ok:   --quiet prints failures only" \
  || { echo "FAIL: --quiet output"; failures=$((failures + 1)); }
# A budget under 1 GiB is said in MiB ("0.00 GiB" said nothing).
expect 3 "a projection over a 1 MiB budget is refused" -- "$ncert" check "$dir/demo/good.h5" --quiet --max-memory 1048576
grep -q "over the memory budget of 1.00 MiB (--max-memory 1048576)" "$dir/out.txt" && echo "ok:   the budget in MiB" \
  || { echo "FAIL: the budget in MiB"; sed 's/^/  | /' "$dir/out.txt"; failures=$((failures + 1)); }

expect 0 "check --json - writes JSON to stdout" -- "$ncert" check "$dir/demo/good.h5" --json -
json_has "$dir/out.txt" "r['verdict']=='PASS'" "stdout JSON parses"
"$ncert" check "$dir/demo/good.h5" --threads 1 --json "$dir/t1.json" >/dev/null
"$ncert" check "$dir/demo/good.h5" --threads 2 --json "$dir/t2.json" >/dev/null
if diff <(grep -v timing_ "$dir/t1.json") <(grep -v timing_ "$dir/t2.json") >/dev/null; then
  echo "ok:   reports byte-identical at 1 and 2 threads (timing_* aside)"
else
  echo "FAIL: reports differ between thread counts"; failures=$((failures + 1))
fi

# Nothing vacuous: a filter that selects nothing, --require, skips in the report.
expect 2 "check --only that matches nothing is a usage error" -- "$ncert" check "$dir/demo/good.h5" --only no-such-name
expect 2 "witness --only that matches nothing is a usage error" -- "$ncert" witness "$dir/demo/good.h5" --only no-such-run
expect 2 "check --require with an unknown kind" -- "$ncert" check "$dir/demo/good.h5" --require untouched,nonsense
expect 1 "check --require all fails on the skips of a good dump" -- "$ncert" check "$dir/demo/good.h5" --require all --json "$dir/req.json"
json_has "$dir/req.json" "any(c['verdict']=='FAIL' and 'required by --require all' in c['reason'] for c in r['checks']) and not any(c['verdict']=='SKIP' for c in r['checks'])" \
  "--require all turns every skip into a FAIL that says so"
json_has "$dir/good.json" "any(c['verdict']=='SKIP' for c in r['checks']) and any(row['subject']=='projections/attn_qkv' for row in r['coverage'])" \
  "check JSON carries skips and the coverage table"

# The skip policy (docs/cli.md "Skip policy"): the good dump's skips expected, then not.
python3 -c "import json; r=json.load(open('$dir/good.json')); kinds=sorted({c['kind'] for c in r['checks'] if c['verdict']=='SKIP'}); json.dump({'ncert_skip_policy': 1, 'expected_skips': [{'kind': k, 'why': 'known'} for k in kinds]}, open('$dir/policy.json', 'w'))"
printf '{"ncert_skip_policy": 1, "expected_skips": [{"kind": "guard"}]}' >"$dir/policy-none.json"
printf '{"ncert_skip_policy": 1, "expected_skips": [{"kind": "wlak"}]}' >"$dir/policy-bad.json"
expect 0 "check --policy expecting every skip passes" -- "$ncert" check "$dir/demo/good.h5" --policy "$dir/policy.json" --json "$dir/pol.json" --junit "$dir/pol.xml"
json_has "$dir/pol.json" "all(c.get('policy_rule',{}).get('why')=='known' for c in r['checks'] if c['verdict']=='SKIP') and any(c['verdict']=='SKIP' for c in r['checks'])" \
  "expected skips carry their policy rule in the JSON"
grep -q '<skipped type="expected"' "$dir/pol.xml" && ! grep -q '<skipped type="unexpected"' "$dir/pol.xml" \
  && echo "ok:   JUnit marks expected skips" || { echo "FAIL: JUnit expected skips"; failures=$((failures + 1)); }
grep -q '^SKIP (expected)  ' "$dir/out.txt" && echo "ok:   text marks expected skips" \
  || { echo "FAIL: text expected skips"; failures=$((failures + 1)); }
expect 1 "check --policy that expects none of the skips fails" -- "$ncert" check "$dir/demo/good.h5" --policy "$dir/policy-none.json" --json "$dir/pol-none.json"
json_has "$dir/pol-none.json" "any(c['verdict']=='FAIL' and c['reason'].startswith('skipped, and no rule of policy') for c in r['checks']) and not any(c['verdict']=='SKIP' for c in r['checks'])" \
  "an unexpected skip is a FAIL naming the policy"
expect 2 "a bad skip policy is refused" -- "$ncert" check "$dir/demo/good.h5" --policy "$dir/policy-bad.json"
grep -q "skip-policy-invalid (107): $dir/policy-bad.json: expected_skips\[0\].kind: \"wlak\" is not a check kind" "$dir/err.txt" \
  && echo "ok:   the refusal names code, file, key and value" || { echo "FAIL: bad policy message"; cat "$dir/err.txt"; failures=$((failures + 1)); }
expect 2 "a missing skip policy is refused" -- "$ncert" witness "$dir/demo/good.h5" --policy "$dir/no-policy.json"
cp "$dir/policy.json" "$dir/demo/policy.json"
printf '{"ncert_campaign": 1, "skip_policy": "policy.json", "entries": [{"id": "good", "check": "good.h5"}]}' >"$dir/demo/pol-campaign.json"
expect 0 "a campaign's skip_policy reaches its check entries" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --journal "$dir/pol-campaign.journal" --json "$dir/pol-campaign.out.json"
json_has "$dir/pol-campaign.out.json" "any('policy_rule' in c for c in r['checks'])" "the campaign's checks carry the policy rule"
expect 1 "campaign --policy replaces the manifest's" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --policy "$dir/policy-none.json" --journal "$dir/pol-campaign2.journal"
expect 2 "campaign --policy with a bad file is refused" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --policy "$dir/policy-bad.json" --journal "$dir/pol-campaign3.journal"
cat "$dir/out.txt" "$dir/err.txt" | grep -q "skip-policy-invalid (107): .*policy-bad.json: expected_skips\[0\].kind" \
  && echo "ok:   campaign refusal names the code" \
  || { echo "FAIL: campaign bad policy message"; cat "$dir/err.txt"; failures=$((failures + 1)); }
expect 2 "campaign --journal - is a usage error" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --journal -
[[ ! -e ./- ]] && echo "ok:   no file named - was made" || { echo "FAIL: a journal named - was made"; failures=$((failures + 1)); }
echo "not a directory" > "$dir/state-file"
expect 2 "campaign --state naming a file is a usage error" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --state "$dir/state-file"
# A bad --policy is the command line's, not the manifest's (it read "MANIFEST: entry g: option
# \"skip_policy\": ..." of a manifest that names none: a review's).
echo '{"ncert_skip_policy": 1, "expected_skips": [{"kind": "wlak"}]}' > "$dir/bad-policy.json"
expect 2 "campaign --policy naming a bad file is refused" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --policy "$dir/bad-policy.json"
grep -q "skip-policy-invalid (107): --policy: " "$dir/out.txt" "$dir/err.txt" && ! grep -q "option \"skip_policy\"" "$dir/out.txt" "$dir/err.txt" \
  && echo "ok:   the refusal names --policy" || { echo "FAIL: the refusal blames the manifest"; failures=$((failures + 1)); }
# Below a file, or in a directory the file system refuses writes to whatever the mode bits say
# (sysfs, even to root): the command line's mistake, usage, not io at run time (a review's exit 3).
expect 2 "campaign --state below a file is a usage error" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --state "$dir/state-file/st"
expect 2 "campaign --journal below a file is a usage error" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --journal "$dir/state-file/j"
grep -q "state-file is not a directory" "$dir/err.txt" && echo "ok:   the file in the way is named" || { echo "FAIL: the file in the way is not named"; failures=$((failures + 1)); }
if [[ -d /sys/kernel ]]; then
  expect 2 "campaign --state in a directory that refuses files is a usage error" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --state /sys/kernel
fi
# JSON a user hands over: nesting no ncert file needs overflowed the stack (exit 139 at 100,000
# levels), and text after a NUL byte was never read (nlohmann stops there).
python3 -c 'import sys; n = 100000; open(sys.argv[1], "w").write("{\"ncert_campaign\": 1, \"entries\": [{\"check\": \"good.h5\", \"id\": " + "{\"a\":" * n + "1" + "}" * n + "}]}")' "$dir/demo/deep.json"
expect 2 "a manifest nested 100,000 deep is refused" -- "$ncert" campaign "$dir/demo/deep.json" --journal "$dir/deep.journal"
grep -q "nested deeper than 64 levels" "$dir/out.txt" "$dir/err.txt" && echo "ok:   the nesting is named" \
  || { echo "FAIL: the deep manifest's refusal does not say why"; failures=$((failures + 1)); }
python3 -c 'import sys; n = 100000; open(sys.argv[1], "w").write("{\"ncert_skip_policy\": 1, \"expected_skips\": [{\"kind\": " + "{\"a\":" * n + "1" + "}" * n + "}]}")' "$dir/deep-policy.json"
expect 2 "a skip policy nested 100,000 deep is refused" -- "$ncert" check "$dir/demo/good.h5" --policy "$dir/deep-policy.json"
printf '{"ncert_campaign": 1, "entries": [{"check": "good.h5"}]}\0 {{{' > "$dir/demo/nul.json"
expect 2 "a manifest with text after a NUL byte is refused" -- "$ncert" campaign "$dir/demo/nul.json" --journal "$dir/nul.journal"
grep -q "a NUL byte at offset 56" "$dir/out.txt" "$dir/err.txt" && echo "ok:   the NUL byte is named" \
  || { echo "FAIL: the NUL manifest's refusal does not say why"; failures=$((failures + 1)); }
# A refused campaign leaves no --state directory behind (a review found new-state/a/b left by a
# manifest that did not load); one that ran keeps it, with its journal.
printf '{"entries": []}' > "$dir/not-a-manifest.json"
expect 2 "campaign with a manifest lacking its version is refused" -- "$ncert" campaign "$dir/not-a-manifest.json" --state "$dir/new-state/a/b"
[[ ! -e "$dir/new-state" ]] && echo "ok:   the refused campaign removed the --state levels it made" \
  || { echo "FAIL: a refused campaign left $dir/new-state"; failures=$((failures + 1)); }
mkdir -p "$dir/old-state"
expect 2 "the same into an existing --state" -- "$ncert" campaign "$dir/not-a-manifest.json" --state "$dir/old-state/a"
[[ -d "$dir/old-state" && ! -e "$dir/old-state/a" ]] && echo "ok:   the directory that was there stays" \
  || { echo "FAIL: --state cleanup touched what was there"; failures=$((failures + 1)); }
expect 0 "a campaign into a new --state" -- "$ncert" campaign "$dir/demo/pol-campaign.json" --state "$dir/new-state/a/b"
[[ -f "$dir/new-state/a/b/pol-campaign.json.journal" ]] && echo "ok:   a campaign that ran keeps its --state and journal" \
  || { echo "FAIL: the campaign's --state journal is missing"; failures=$((failures + 1)); }
# stdout appended to the campaign's own journal (a review's `--resume >> model.json.journal`).
expect 2 "campaign --resume with stdout into its journal is a path conflict" -- bash -c "\"\$0\" campaign \"\$1\" --journal \"\$2\" --resume --quiet >> \"\$2\"" "$ncert" "$dir/demo/pol-campaign.json" "$dir/pol-campaign.journal"
grep -q "path-conflict (105)" "$dir/err.txt" && echo "ok:   the journal on stdout is named" || { echo "FAIL: stdout into the journal not refused"; failures=$((failures + 1)); }

expect 0 "inspect a valid dump" -- "$ncert" inspect "$dir/demo/good.h5" --json "$dir/inspect.json"
json_has "$dir/inspect.json" "all(set(d)>={'path','shape','dtype','xxh3_128'} for d in r['datasets']) and len(r['datasets'])>10" \
  "inspect JSON lists datasets with path, shape, dtype and hash"
expect 3 "inspect a refused dump" -- "$ncert" inspect "$dir/garbage.h5"
expect 2 "sweep --case with a malformed key" -- "$ncert" sweep --case "pack(kind=nope)"
expect 2 "sweep --case '' names no case (it ran the whole sweep)" -- "$ncert" sweep --case ""
expect 2 "compare --policy that does not parse is a usage error" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --policy ulp:-1
! grep -q "(409)" "$dir/err.txt" && grep -q 'policy "ulp:-1" is not one of' "$dir/err.txt" \
  && echo "ok:   it names the policy, not an input's error code" \
  || { echo "FAIL: --policy ulp:-1 message"; failures=$((failures + 1)); }
expect 2 "demo --dir '' names no directory" -- "$ncert" demo --dir ""
expect 0 "sweep --filter a subset" -- "$ncert" sweep --filter "fmt=af4c,K=32" --json "$dir/sweep.json"
json_has "$dir/sweep.json" "set(r['stats'])>={'identity_comparisons','alias_cases','guard_cases','guards_covered'}" \
  "sweep JSON carries the contract's stats"

# Logits: witnesses, their file and its verification.
expect 0 "witness a good dump" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w.h5" --json "$dir/witness.json"
json_has "$dir/witness.json" "r['command']=='witness' and r['checks'][0]['kind']=='witness' and len(r['witnesses']['greedy'])==r['checks'][0]['stats']['tokens']" \
  "witness JSON has one witness per emitted token"
expect 0 "witness --verify the file just written" -- "$ncert" witness --verify "$dir/w.h5" "$dir/demo/good.h5"
expect 2 "witness --out refuses to overwrite" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w.h5"
expect 0 "witness --out --force overwrites" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w.h5" --force --quiet
# The summary beside --out is a report: it replaces an empty file or a report, never another file,
# --force or not (a review's W.h5.json, a copy of a dump, was overwritten).
cp "$dir/demo/good.h5" "$dir/w2.h5.json"
expect 2 "witness --out refuses to replace a summary path that holds a dump" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w2.h5" --force
if cmp -s "$dir/demo/good.h5" "$dir/w2.h5.json" && [[ ! -e "$dir/w2.h5" ]] && grep -q "output-exists (102)" "$dir/err.txt"; then
  echo "ok:   the dump at the summary's path is untouched and no witness file was written"
else
  echo "FAIL: witness --out replaced a dump at its summary's path"
  failures=$((failures + 1))
fi
# The reports are replaced together or not at all: one that cannot be written (a full disk) leaves
# the others as the previous run wrote them (the code review's new JSON beside an old HTML).
expect 0 "reports written" -- "$ncert" check "$dir/demo/good.h5" --html "$dir/together.html" --junit "$dir/together.xml" --quiet
cp "$dir/together.html" "$dir/together-before.html"
expect 1 "a failing check whose JSON cannot be written keeps its exit code" -- "$ncert" check "$dir/demo/nan-output.h5" --json /dev/full --html "$dir/together.html" --junit "$dir/together.xml" --quiet
if cmp -s "$dir/together.html" "$dir/together-before.html" && grep -q 'ncert.verdict" value="PASS' "$dir/together.xml" \
  && grep -q "not replacing .*together.html: the reports are replaced together" "$dir/err.txt"; then
  echo "ok:   the other reports are left as they were, and say why"
else
  echo "FAIL: a report was replaced beside one that could not be written"
  failures=$((failures + 1))
fi
# A summary that cannot be written (a full disk: here a link to /dev/full) never hides the
# verdict: the witnesses are reported, PASS exits 5 (it read "input refused", exit 5, its checks
# replaced by a schema FAIL: a review's).
ln -sf /dev/full "$dir/w4.h5.json"
expect 5 "witness --out whose summary cannot be written keeps its verdict" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w4.h5" --json "$dir/w4-report.json"
if grep -q "report-write (205).*(the witness file .*w4.h5 was written, its summary not)" "$dir/err.txt" && ! grep -q REFUSED "$dir/out.txt" \
  && grep -q "verdict: PASS" "$dir/out.txt"; then
  echo "ok:   the verdict stands beside the write failure"
else
  echo "FAIL: the summary's failure hid the verdict"
  failures=$((failures + 1))
fi
json_has "$dir/w4-report.json" "r['verdict']=='PASS' and any(c['kind']=='witness' for c in r['checks'])" \
  "the report keeps the witnesses"
echo "notes" > "$dir/notes.txt" && ln -sf "$dir/notes.txt" "$dir/w3.h5.json"
expect 2 "witness --out refuses a summary path linked to a file that is no report" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w3.h5"
json_has "$dir/witness.json" "open('$dir/notes.txt').read()=='notes\\n'" "the linked file is untouched"
expect 0 "witness --out replaces its own earlier summary" -- "$ncert" witness "$dir/demo/good.h5" --out "$dir/w.h5" --force --quiet
expect 2 "witness --out to a device is a usage error" -- "$ncert" witness "$dir/demo/good.h5" --out /dev/null --force
expect 2 "witness --force without --out is a usage error" -- "$ncert" witness "$dir/demo/good.h5" --force
expect 2 "witness needs DUMP or --verify" -- "$ncert" witness
expect 3 "witness --verify refuses a dump as a witness file" -- "$ncert" witness --verify "$dir/demo/good.h5" "$dir/demo/good.h5"

# Logits: compare two builds.
expect 1 "compare: noisy builds fail the default bitwise policy" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --json "$dir/cmp.json"
json_has "$dir/cmp.json" "r['checks'][0]['kind']=='logits' and r['checks'][0]['stats']['first_failure_row']==0 and 'p99.9' in r['checks'][0]['stats']['kl_ab']" \
  "compare JSON names the first failing row and carries KL percentiles"
expect 0 "compare --policy kl:1e-5 passes" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --policy kl:1e-5
expect 0 "compare a dump with itself passes bitwise" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-a.h5"
expect 2 "compare --policy that does not parse" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --policy kl:abc
expect 2 "compare --pair given twice" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --pair greedy:greedy --pair greedy:greedy
grep -q -- "--pair greedy:greedy is given twice" "$dir/out.txt" "$dir/err.txt" && echo "ok:   the repeated pair is named" \
  || { echo "FAIL: a repeated --pair is not named"; failures=$((failures + 1)); }
expect 2 "compare --pair without a colon" -- "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --pair greedy
expect 3 "compare refuses different vocabularies" -- "$ncert" compare "$dir/demo/good.h5" "$dir/demo/logits-a.h5"

# Wording forks.
expect 0 "forks: a near-tie fork passes" -- "$ncert" forks "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --json "$dir/fork.json"
json_has "$dir/fork.json" "[c['stats']['class'] for c in r['checks'] if c['kind']=='fork']==['near-tie'] and all('position' in c['stats'] for c in r['checks'])" \
  "fork JSON holds class and position"
expect 1 "forks: an unexplained fork fails" -- "$ncert" forks "$dir/demo/fork-unexplained-a.h5" "$dir/demo/fork-unexplained-b.h5"
expect 1 "forks: an invalid emission fails" -- "$ncert" forks "$dir/demo/fork-invalid-a.h5" "$dir/demo/fork-invalid-b.h5"
expect 1 "forks --require-identical fails on a near-tie" -- "$ncert" forks "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --require-identical
# compare --policy forks gives the verdict forks gives on the same pairs.
expect 0 "compare --policy forks passes the near-tie fork forks passes" -- "$ncert" compare "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --policy forks --json "$dir/cmp-forks.json"
json_has "$dir/cmp-forks.json" "[f['class'] for c in r['checks'] if c['kind']=='logits' for f in c['stats']['forks']]==['near-tie'] and r['checks'][0]['stats']['policy_source']=='--policy'" \
  "compare --policy forks JSON holds the fork's class and where the policy came from"
expect 1 "compare --policy forks fails the unexplained fork forks fails" -- "$ncert" compare "$dir/demo/fork-unexplained-a.h5" "$dir/demo/fork-unexplained-b.h5" --policy forks
expect 1 "compare --policy forks fails the invalid emission forks fails" -- "$ncert" compare "$dir/demo/fork-invalid-a.h5" "$dir/demo/fork-invalid-b.h5" --policy forks
expect 3 "forks --vocab with a missing file is refused" -- "$ncert" forks "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --vocab "$dir/nope.json"
# A vocabulary file of another size is said, not refused (tokenizers are often shorter than the
# logits' padded vocabulary, 2,000 here).
python3 -c 'import json,sys; json.dump(["t%d" % i for i in range(int(sys.argv[2]))], open(sys.argv[1], "w"))' "$dir/vocab-short.json" 1500
python3 -c 'import json,sys; json.dump(["t%d" % i for i in range(int(sys.argv[2]))], open(sys.argv[1], "w"))' "$dir/vocab-long.json" 2500
expect 0 "forks --vocab shorter than the vocabulary runs" -- "$ncert" forks "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --vocab "$dir/vocab-short.json"
grep -q "vocab-short.json: 1500 token texts for a vocabulary of 2000 (ids from 1500 on show as <id N?>)" "$dir/out.txt" \
  && echo "ok:   a short vocabulary file is said" || { echo "FAIL: a short vocabulary file went unsaid"; failures=$((failures + 1)); }
expect 0 "forks --vocab longer than the vocabulary runs" -- "$ncert" forks "$dir/demo/fork-near-tie-a.h5" "$dir/demo/fork-near-tie-b.h5" --vocab "$dir/vocab-long.json"
grep -q "vocab-long.json: 2500 token texts, more than the vocabulary of 2000: is it this model's tokenizer?" "$dir/out.txt" \
  && echo "ok:   a long vocabulary file is questioned" || { echo "FAIL: a long vocabulary file went unsaid"; failures=$((failures + 1)); }

# A mistyped command gets a suggestion.
expect 2 "a typo is a usage error" -- "$ncert" chek "$dir/demo/good.h5"
if grep -q 'did you mean "check"' "$dir/err.txt"; then echo "ok:   a typo suggests the command"; else
  echo "FAIL: no suggestion for chek"; failures=$((failures + 1)); fi

# A misspelt option is named with the nearest one, not blamed on the dump beside it; a value
# that is not a number says so in the option's unit, and one out of range gives the range.
expect 2 "a misspelt option is a usage error" -- "$ncert" check --thread 4 "$dir/demo/good.h5"
if grep -q 'unknown option --thread for `ncert check`; did you mean --threads?' "$dir/err.txt" &&
  ! grep -q "good.h5" "$dir/err.txt"; then echo "ok:   a misspelt option suggests the option"; else
  echo "FAIL: no suggestion for --thread"; sed 's/^/  | /' "$dir/err.txt"; failures=$((failures + 1)); fi
# Logits in chunks of every row by one column: read in whole chunks, one block of all 512 rows
# (16 MiB) does not fit an 8 MiB budget. Refused up front, naming the file and the layout (a
# review's such file was read at 9x its budget).
/usr/bin/python3 - "$dir/colchunk.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs.update({"ncert_schema": "ncert-dump", "ncert_schema_version": 1, "engine": "e", "build": "b"})
    g = f.create_group("logits/greedy")
    g.attrs["vocab"] = 8192
    logits = np.zeros((512, 8192), np.float32)
    logits[np.arange(512), np.arange(512)] = 1
    g.create_dataset("logits", data=logits, chunks=(512, 1))
    g["tokens"] = np.arange(512, dtype=np.int32)
PY
expect 3 "column-chunked logits over the budget are refused" -- "$ncert" witness "$dir/colchunk.h5" --max-memory 8388608
grep -q "colchunk.h5: /logits/greedy/logits: its blocks of 512 rows take 16777216 bytes at once, over the memory limit of 8388608 (its chunks hold 512 rows each" "$dir/out.txt" "$dir/err.txt" \
  && echo "ok:   the file and its layout are named" || { echo "FAIL: the column-chunk refusal does not name the layout"; failures=$((failures + 1)); }
expect 0 "the same within the default budget" -- "$ncert" witness "$dir/colchunk.h5" --quiet
# bf16 bits written into a native float16 dataset, tagged bf16: read as f16 without a word before.
cp "$dir/demo/good.h5" "$dir/f16-tagged-bf16.h5"
/usr/bin/python3 - "$dir/f16-tagged-bf16.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "a") as f:
    g = f["projections/attn_qkv"]
    x = g["x"][...]
    del g["x"]
    g.create_dataset("x", data=np.zeros(x.shape, np.float16))
    g["x"].attrs["dtype"] = "bf16"
PY
expect 3 "a native float16 dataset tagged bf16 is refused" -- "$ncert" check "$dir/f16-tagged-bf16.h5"
grep -q 'stored as f16 but its attribute dtype = "bf16" names another type' "$dir/out.txt" "$dir/err.txt" \
  && echo "ok:   the contradiction is named" || { echo "FAIL: the tag contradiction is not named"; failures=$((failures + 1)); }
expect 2 "--max-memory 8GiB is a usage error" -- "$ncert" check "$dir/demo/good.h5" --max-memory 8GiB
if grep -q -- '--max-memory: 8GiB is not a whole number of bytes (e.g. 8589934592 for 8 GiB)' "$dir/err.txt"; then
  echo "ok:   a value that is not a number says so"; else
  echo "FAIL: --max-memory 8GiB"; sed 's/^/  | /' "$dir/err.txt"; failures=$((failures + 1)); fi
expect 2 "--threads 0 is out of range" -- "$ncert" check "$dir/demo/good.h5" --threads 0
if grep -q -- '--threads: 0 is outside 1–1024' "$dir/err.txt"; then echo "ok:   an out-of-range value gives the range"; else
  echo "FAIL: --threads 0"; sed 's/^/  | /' "$dir/err.txt"; failures=$((failures + 1)); fi

# Progress on a terminal: cli_tty_test.sh (skipped where no pseudo-terminal can be made). Never in
# pipes or files:
NCERT_PROGRESS_DELAY=0 "$ncert" compare "$dir/demo/logits-a.h5" "$dir/demo/logits-b.h5" --policy kl:1e-5 >"$dir/out.txt" 2>"$dir/err.txt"
if ! grep -q "rows 64/64" "$dir/out.txt" "$dir/err.txt"; then echo "ok:   no progress in pipes or files"; else
  echo "FAIL: progress written to a file"; failures=$((failures + 1)); fi

# Each refusal is printed once (a REFUSED line, not also a FAIL schema line with the same text).
"$ncert" check "$dir/garbage.h5" >"$dir/out.txt" 2>&1
if [[ $(grep -c "not an HDF5 file" "$dir/out.txt") == 1 ]] && grep -q "^REFUSED" "$dir/out.txt"; then
  echo "ok:   a refusal is printed once"
else
  echo "FAIL: a refusal is not printed exactly once"; sed 's/^/  | /' "$dir/out.txt"; failures=$((failures + 1))
fi

# The bash completion and the man page generated from the command line (NCERT_SHARE: the build's share/).
share="${3:-}"
if [[ -n "$share" ]]; then
  got=$(bash -c "source '$share/bash-completion/completions/ncert'; COMP_WORDS=(ncert ch); COMP_CWORD=1; _ncert; echo \${COMPREPLY[@]}")
  if [[ "$got" == "check" ]]; then echo "ok:   completion of 'ncert ch'"; else echo "FAIL: completion of 'ncert ch' gave '$got'"; failures=$((failures + 1)); fi
  got=$(bash -c "source '$share/bash-completion/completions/ncert'; COMP_WORDS=(ncert campaign --res); COMP_CWORD=2; _ncert; echo \${COMPREPLY[@]}")
  if [[ "$got" == "--resume" ]]; then echo "ok:   completion of a campaign flag"; else echo "FAIL: completion of --res gave '$got'"; failures=$((failures + 1)); fi
  if command -v groff >/dev/null; then
    page=$(groff -man -Tascii "$share/man/man1/ncert.1" 2>&1 | col -b 2>/dev/null || true)
    for want in "SYNOPSIS" "campaign MANIFEST" "--hdf5-timeout" "EXIT STATUS"; do
      if grep -qF -- "$want" <<<"$page"; then echo "ok:   man page has $want"; else echo "FAIL: man page lacks $want"; failures=$((failures + 1)); fi
    done
  fi
fi

if ((failures > 0)); then
  echo "$failures CLI expectation(s) failed"
  exit 1
fi
echo "all CLI expectations hold"
