"""A campaign's journal against changed inputs and changed lines (docs/campaigns.md "Nothing lost").

Every record carries the content hash of each file its item read, and every line a checksum chained
to the line before it and, through the header, to the manifest. Each test runs a campaign over
`ncert demo`'s dumps (copied where a test replaces them), changes something between the run and
`--resume`, and holds the resumed report against a fresh campaign's over the same files:

- dumps replaced after a finished campaign (a good dump by a faulty one and a faulty one by a good
  one, one rewritten in place, one renamed over): the items that read them run again, the faulty
  one FAILs, the good one PASSes, and the report equals a fresh run's, byte for byte timing aside;
- a journal line's verdict edited from FAIL to PASS, a journal line removed, a journal of format 1
  (no checksums): the lines not trusted are named in the report's journal_notices and the text
  summary, their items run again, and the report is a fresh run's plus those notices;
- SIGTERM to the campaign, SIGINT to its process group: it ends by the signal (128 + N) with no
  report, the journal keeps the finished items, and --resume gives a fresh run's report with no
  notice.

Where the journal goes (no --journal): beside the report, or in --state DIR, never in the inputs'
folder; a finished campaign run again with no cleanup is a fresh run that replaces the journal,
and an interrupted one resumes from the journal beside its report.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from jsonschema import Draft202012Validator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from ncert_testing import scratch, strip_timing  # noqa: E402

NCERT = os.environ["NCERT_BINARY"]
SCHEMA = os.path.join(HERE, "..", "..", "docs", "report.schema.json")


TIMING = re.compile(r'("timing_[a-z_]+": )[^,\n}]*')


class Report(dict):
    """A campaign's JSON report, parsed, with its text as written (`raw`)."""

    def __init__(self, raw):
        super().__init__(json.loads(raw))
        self.raw = raw


def run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True)


def journal_lines(path):
    with open(path) as f:
        return f.read().splitlines(keepends=True)


def key_of(line):
    return json.loads(line)["line"].get("key")


class CampaignJournal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.demo = scratch("demo", "campaign-journal")
        r = run([NCERT, "demo", "--dir", cls.demo, "--quiet"], cls.demo)
        assert r.returncode == 0, r.stdout + r.stderr
        r = run([NCERT, "witness", "good.h5", "--out", "good.witness.h5", "--quiet"], cls.demo)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(SCHEMA) as f:
            cls.schema = Draft202012Validator(json.load(f))

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self._testMethodName + "-", dir=os.path.dirname(self.demo))
        # step-a starts good and step-b faulty; the tests swap them.
        shutil.copyfile(self.shared("good.h5"), self.path("step-a.h5"))
        shutil.copyfile(self.shared("nan-output.h5"), self.path("step-b.h5"))

    def shared(self, name):
        return os.path.join(self.demo, name)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_manifest(self, extra_checks=0):
        entries = [
            {"id": "step-a", "check": "step-a.h5"},
            {"id": "step-b", "check": "step-b.h5"},
            {"id": "compare", "compare": [self.shared("logits-a.h5"), self.shared("logits-b.h5")], "policy": "top1"},
            {"id": "forks", "forks": [self.shared("fork-near-tie-a.h5"), self.shared("fork-near-tie-b.h5")]},
            {"id": "verify", "verify": [self.shared("good.witness.h5"), self.shared("good.h5")]},
        ]
        # More work for a signal to land in the middle of: the demo's dumps again, under other ids.
        dumps = sorted(n for n in os.listdir(self.demo) if n.endswith(".h5") and not n.startswith(("fork-", "logits-"))
                       and n != "good.witness.h5")
        for i in range(extra_checks):
            entries.append({"id": "more-%d" % i, "check": self.shared(dumps[i % len(dumps)])})
        manifest = self.path("campaign.json")
        with open(manifest, "w") as f:
            json.dump({"ncert_campaign": 1, "name": "journal", "entries": entries}, f)
        return manifest

    def campaign(self, manifest, tag, resume=False, extra=()):
        """Runs (or resumes) the campaign with journal TAG.journal: (exit code, report, stdout)."""
        out = self.path(tag + ".json")
        if os.path.exists(out):
            os.remove(out)
        args = [NCERT, "campaign", manifest, "--journal", self.path(tag + ".journal"), "--json", out, "--workers", "2"]
        r = run(args + (["--resume"] if resume else []) + list(extra), self.dir)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        with open(out) as f:
            report = Report(f.read())
        errors = [e.message for e in self.schema.iter_errors(report)]
        self.assertEqual(errors, [], "the report does not match docs/report.schema.json")
        return r.returncode, report, r.stdout

    def fresh(self, manifest, tag="fresh"):
        journal = self.path(tag + ".journal")
        if os.path.exists(journal):
            os.remove(journal)
        return self.campaign(manifest, tag)

    def entry(self, report, entry_id):
        return next(e for e in report["entries"] if e["id"] == entry_id)

    def assert_same_report(self, resumed, fresh, notices=0):
        """The resumed report is the fresh one byte for byte, timing values aside, but for
        `notices` journal notices (then: the same members in the same order, notices aside)."""
        self.assertEqual(len(resumed.get("journal_notices", [])), notices)
        if notices == 0:
            self.assertEqual(TIMING.sub(r"\1T", resumed.raw), TIMING.sub(r"\1T", fresh.raw))
        else:
            rest = {k: v for k, v in resumed.items() if k != "journal_notices"}
            self.assertEqual(json.dumps(strip_timing(rest)), json.dumps(strip_timing(dict(fresh))))

    def test_replaced_dumps_are_certified_again(self):
        manifest = self.write_manifest()
        code, first, _ = self.campaign(manifest, "run")
        self.assertEqual(code, 1)
        self.assertEqual(self.entry(first, "step-a")["verdict"], "PASS")
        self.assertEqual(self.entry(first, "step-b")["verdict"], "FAIL")
        lines = len(journal_lines(self.path("run.journal")))
        # step-a rewritten in place with a faulty dump, step-b replaced by a good one (renamed over).
        shutil.copyfile(self.shared("nan-output.h5"), self.path("step-a.h5"))
        shutil.copyfile(self.shared("good.h5"), self.path("new-b.h5"))
        os.rename(self.path("new-b.h5"), self.path("step-b.h5"))
        code, resumed, _ = self.campaign(manifest, "run", resume=True)
        self.assertEqual(code, 1)
        self.assertEqual(self.entry(resumed, "step-a")["verdict"], "FAIL")
        self.assertEqual(self.entry(resumed, "step-b")["verdict"], "PASS")
        for e in ("step-a", "step-b"):
            self.assertNotEqual(self.entry(resumed, e)["report"]["inputs"], self.entry(first, e)["report"]["inputs"])
        # Only the items of the two replaced dumps ran again: the others' records were kept.
        rerun = [key_of(line) for line in journal_lines(self.path("run.journal"))[lines:]]
        self.assertTrue(rerun)
        self.assertEqual({k.split("#")[0] for k in rerun}, {"step-a", "step-b"})
        self.assert_same_report(resumed, self.fresh(manifest)[1])
        # Put back as they were: the first records are valid again, nothing runs, same report.
        shutil.copyfile(self.shared("good.h5"), self.path("step-a.h5"))
        shutil.copyfile(self.shared("nan-output.h5"), self.path("step-b.h5"))
        lines = len(journal_lines(self.path("run.journal")))
        code, back, _ = self.campaign(manifest, "run", resume=True)
        self.assertEqual(len(journal_lines(self.path("run.journal"))), lines)
        self.assert_same_report(back, first)

    def test_a_skip_policy_edited_in_place_or_another_memory_limit_runs_its_items_again(self):
        # A review's: a policy that expected the witness entry's skip, then tightened in place to
        # require it; --resume kept the PASS a fresh run fails. The policy file is an input of
        # the entries that read it, and --max-memory a setting every record is bound to.
        policy = self.path("policy.json")
        with open(policy, "w") as f:
            json.dump({"ncert_skip_policy": 1, "expected_skips": [{"kind": "witness", "why": "no lm_head"}]}, f)
        manifest = self.path("campaign.json")
        with open(manifest, "w") as f:
            json.dump({"ncert_campaign": 1,
                       "entries": [{"id": "w", "witness": self.shared("logits-a.h5"), "skip_policy": "policy.json"},
                                   {"id": "c", "check": "step-a.h5"}]}, f)
        code, first, _ = self.campaign(manifest, "run")
        self.assertEqual(code, 0)
        with open(policy, "w") as f:
            json.dump({"ncert_skip_policy": 1, "required": ["witness"]}, f)
        code, resumed, _ = self.campaign(manifest, "run", resume=True)
        # Resumed again with nothing changed since: no item runs again, and none is said to (each
        # resume counted the records the last one superseded: a review's).
        with open(self.path("run.journal")) as f:
            lines = len(f.readlines())
        again = run([NCERT, "campaign", manifest, "--journal", self.path("run.journal"), "--json",
                     self.path("again.json"), "--resume"], self.dir)
        self.assertEqual(again.returncode, 1, again.stdout + again.stderr)
        self.assertNotIn("run again", again.stderr)
        with open(self.path("run.journal")) as f:
            self.assertEqual(len(f.readlines()), lines)
        fresh_code, fresh, _ = self.fresh(manifest)
        self.assertEqual(fresh_code, 1)
        self.assertEqual(code, fresh_code)
        self.assertEqual(self.entry(resumed, "w")["verdict"], "FAIL")
        self.assert_same_report(resumed, fresh)
        # A memory limit that refuses the dump, then the default: the refusal is not kept.
        code, small, _ = self.campaign(manifest, "mem", extra=["--max-memory", "1048576"])
        self.assertEqual(self.entry(small, "c")["verdict"], "FAIL")
        self.assertIn("memory", json.dumps(self.entry(small, "c")["report"]))
        code, resumed, _ = self.campaign(manifest, "mem", resume=True)
        self.assertEqual(self.entry(resumed, "c")["verdict"], "PASS")
        self.assert_same_report(resumed, self.fresh(manifest, "fresh2")[1])

    def test_two_campaigns_started_together_on_one_journal_run_one_at_a_time(self):
        # A review's: started within milliseconds of each other, both campaigns passed the lock
        # (the first tested the old file's lock, let it go, then renamed a new journal over it),
        # both ran and one journal was lost. Now the second is refused every time.
        manifest = self.write_manifest(extra_checks=6)
        for attempt in range(4):
            for name in ("together.journal", "a.json", "b.json"):
                if os.path.exists(self.path(name)):
                    os.remove(self.path(name))
            procs = [subprocess.Popen([NCERT, "campaign", manifest, "--journal", self.path("together.journal"),
                                       "--json", self.path(out), "--quiet"], cwd=self.dir,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for out in ("a.json", "b.json")]
            results = [(p.wait(timeout=300), p.stdout.read() + p.stderr.read()) for p in procs]
            for p in procs:
                p.stdout.close()
                p.stderr.close()
            codes = sorted(code for code, _ in results)
            self.assertEqual(codes, [1, 2], "attempt %d: %r" % (attempt, results))
            refused = next(err for code, err in results if code == 2)
            self.assertIn("output-exists (102)", refused)
            self.assertIn("another campaign is running with this journal", refused)

    def test_a_report_to_dev_null_puts_the_journal_in_the_working_directory(self):
        # A review's: --json /dev/null made /dev the report's directory and the journal
        # /dev/campaign.json.journal (a tmpfs, and not writable but by root).
        manifest = self.write_manifest()
        stray = "/dev/" + os.path.basename(manifest) + ".journal"
        if os.path.exists(stray):
            os.remove(stray)
        r = run([NCERT, "campaign", manifest, "--json", "/dev/null", "--quiet"], self.dir)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertFalse(os.path.exists(stray))
        self.assertTrue(os.path.exists(self.path(os.path.basename(manifest) + ".journal")))

    def test_an_edited_verdict_is_not_trusted(self):
        manifest = self.write_manifest()
        _, fresh, _ = self.campaign(manifest, "run")
        lines = journal_lines(self.path("run.journal"))
        n = next(i for i, line in enumerate(lines) if '"verdict":"FAIL"' in line)
        key = key_of(lines[n])
        self.assertTrue(key.startswith("step-b#"), key)
        lines[n] = lines[n].replace('"verdict":"FAIL"', '"verdict":"PASS"', 1)
        with open(self.path("run.journal"), "w") as f:
            f.writelines(lines)
        code, resumed, text = self.campaign(manifest, "run", resume=True)
        self.assertEqual(code, 1)
        self.assertEqual(self.entry(resumed, "step-b")["verdict"], "FAIL")
        self.assertEqual(len(resumed["journal_notices"]), 1)
        self.assertIn("line %d (%s) does not verify" % (n + 1, key), resumed["journal_notices"][0])
        self.assertIn("journal: line %d (%s)" % (n + 1, key), text)
        self.assert_same_report(resumed, fresh, notices=1)
        # The item ran again and its new record is trusted; the edited line is still named.
        self.assertEqual(key_of(journal_lines(self.path("run.journal"))[-1]), key)

    def test_a_removed_line_is_not_trusted(self):
        manifest = self.write_manifest()
        _, fresh, _ = self.campaign(manifest, "run")
        lines = journal_lines(self.path("run.journal"))
        self.assertGreater(len(lines), 4)
        removed, after = key_of(lines[2]), key_of(lines[3])
        del lines[2]
        with open(self.path("run.journal"), "w") as f:
            f.writelines(lines)
        code, resumed, _ = self.campaign(manifest, "run", resume=True)
        self.assertEqual(code, 1)
        # The line after the removed one no longer chains: named, and both items run again.
        self.assertEqual(len(resumed["journal_notices"]), 1)
        self.assertIn("line 3 (%s) does not verify" % after, resumed["journal_notices"][0])
        self.assert_same_report(resumed, fresh, notices=1)
        rerun = {key_of(line) for line in journal_lines(self.path("run.journal"))[len(lines):]}
        self.assertLessEqual({removed, after}, rerun)

    def test_a_journal_of_format_one_runs_everything_again(self):
        """A journal written before lines carried checksums: untrusted, with one notice, not an error."""
        manifest = self.write_manifest()
        _, fresh, _ = self.campaign(manifest, "run")
        old = []
        for i, line in enumerate(journal_lines(self.path("run.journal"))):
            body = json.loads(line)["line"]
            if i == 0:
                body = {"ncert_campaign_journal": 1, "wire": body["wire"],
                        "manifest_xxh3_128": body["manifest_xxh3_128"]}
            else:
                body = {"key": body["key"], "result": body["result"]}
            old.append(json.dumps(body, separators=(",", ":")) + "\n")
        with open(self.path("run.journal"), "w") as f:
            f.writelines(old)
        code, resumed, _ = self.campaign(manifest, "run", resume=True)
        self.assertEqual(code, 1)
        self.assertEqual(len(resumed["journal_notices"]), 1)
        self.assertIn("format 1", resumed["journal_notices"][0])
        self.assertIn("none of its %d records is trusted" % (len(old) - 1), resumed["journal_notices"][0])
        self.assert_same_report(resumed, fresh, notices=1)
        after = journal_lines(self.path("run.journal"))
        self.assertEqual(json.loads(after[len(old)])["line"]["ncert_campaign_journal"], 2)
        self.assertEqual(len(after) - len(old) - 1, fresh["stats"]["work_items"])

    def start_until_journaled(self, args, journal, **popen):
        """Starts a campaign and returns it running once its journal holds 3 finished items."""
        p = subprocess.Popen(args, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(journal) and len(journal_lines(journal)) >= 4:
                break
            time.sleep(0.005)
        self.assertIsNone(p.poll(), "the campaign ended before the signal")
        return p

    def test_a_signal_ends_the_campaign_without_a_report_and_resume_finishes_it(self):
        manifest = self.write_manifest(extra_checks=24)
        _, fresh, _ = self.fresh(manifest)
        for sig, group in ((signal.SIGTERM, False), (signal.SIGINT, True)):
            with self.subTest(signal=sig.name):
                tag = "stopped-" + sig.name
                journal, out = self.path(tag + ".journal"), self.path(tag + ".json")
                p = self.start_until_journaled([NCERT, "campaign", manifest, "--journal", journal, "--json", out,
                                                "--quiet", "--workers", "1", "--threads", "1"], journal,
                                               start_new_session=True)
                if group:
                    os.killpg(p.pid, sig)  # as a terminal's Ctrl-C: the campaign and its items
                else:
                    p.send_signal(sig)
                _, err = p.communicate(timeout=60)
                self.assertIn(p.returncode, (-sig, 128 + sig), err)
                self.assertFalse(os.path.exists(out), "a stopped campaign must not write a report")
                self.assertEqual([n for n in os.listdir(self.dir) if ".tmp" in n], [])
                done = len(journal_lines(journal)) - 1
                self.assertGreaterEqual(done, 3)
                code, resumed, _ = self.campaign(manifest, tag, resume=True)
                self.assertEqual(code, 1)
                self.assertNotIn("journal_notices", resumed)
                self.assert_same_report(resumed, fresh)
                self.assertLess(done, resumed["stats"]["work_items"], "the signal came after the campaign ended")

    def journal_header(self, path):
        return json.loads(journal_lines(path)[0])["line"]

    def test_a_finished_campaign_runs_again_with_no_cleanup_and_the_inputs_get_no_journal(self):
        manifest = self.write_manifest()
        inputs = sorted(os.listdir(self.dir))
        reports = self.path("reports")
        os.mkdir(reports)
        out = os.path.join(reports, "campaign.json")
        journal = os.path.join(reports, "campaign.json.journal")  # beside the report, named after the manifest
        runs = []
        for _ in range(2):
            r = run([NCERT, "campaign", manifest, "--json", out, "--workers", "2"], self.dir)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # step-b is faulty: FAIL, not an error
            with open(out) as f:
                report = Report(f.read())
            runs.append((report, self.journal_header(journal), journal_lines(journal)))
            self.assertEqual(sorted(os.listdir(self.dir)), sorted(inputs + ["reports"]), "the inputs' folder changed")
            self.assertEqual(sorted(os.listdir(reports)), ["campaign.json", "campaign.json.journal"])
        (first, first_header, first_lines), (second, second_header, second_lines) = runs
        # The second run is a fresh one: a new campaign id in a new journal that holds every item
        # once (nothing appended to the first run's), and the report the first run wrote.
        self.assertNotEqual(first_header["campaign"], second_header["campaign"])
        self.assertEqual(len(second_lines), 1 + second["stats"]["work_items"])
        self.assertEqual(len(first_lines), len(second_lines))
        self.assertNotIn("journal_notices", second)
        self.assert_same_report(second, first)
        # A report on stdout only: the journal goes to the working directory, here not the inputs'.
        work = self.path("work")
        os.mkdir(work)
        r = run([NCERT, "campaign", manifest, "--quiet"], work)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(os.listdir(work), ["campaign.json.journal"])
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(inputs + ["reports", "work"]))

    def test_state_names_the_journal_directory_and_resume_finds_it_there(self):
        manifest = self.write_manifest(extra_checks=24)
        _, fresh, _ = self.fresh(manifest)
        state, out = self.path("state/ci"), self.path("stopped.json")
        journal = os.path.join(state, "campaign.json.journal")
        args = [NCERT, "campaign", manifest, "--state", state, "--json", out, "--quiet"]
        p = self.start_until_journaled(args + ["--workers", "1", "--threads", "1"], journal)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        self.assertIn(p.returncode, (-signal.SIGTERM, 128 + signal.SIGTERM), err)
        done = journal_lines(journal)
        self.assertGreaterEqual(len(done), 4)
        # --resume continues it: the items journaled are not run again, the report is a fresh run's.
        r = run(args + ["--workers", "2", "--resume"], self.dir)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(out) as f:
            resumed = Report(f.read())
        self.assertNotIn("journal_notices", resumed)
        self.assert_same_report(resumed, fresh)
        after = journal_lines(journal)
        self.assertEqual(after[:len(done)], done)
        self.assertEqual(len(after), 1 + resumed["stats"]["work_items"])
        # The journal goes in one place: --state and --journal together are a usage error.
        r = run(args + ["--journal", self.path("x.journal")], self.dir)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--state and --journal", r.stdout + r.stderr)
        self.assertFalse(os.path.exists(self.path("x.journal")))


if __name__ == "__main__":
    unittest.main()
