"""ncert campaign against the commands it runs: a campaign of the fixture dumps (every `ncert demo`
dump checked, a compare, a forks pair, a witness and a witness verification, and one corrupt
dump) must give the same merged report on local processes (1 and 2 workers, 1 and 2 threads)
and under `mpirun -n 3`; every entry's report must equal its own command's, and the campaign's
HTML page must draw every plot of every entry's own page (the evidence crosses the wire typed);
a campaign SIGKILLed mid-way and resumed must give the same report; the corrupt dump is one
failed entry of a finished campaign; a journal of another wire version is refused. What a journal
does against changed inputs and changed lines is journal_test.py's."""
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ncert_testing import needs, strip_timing  # noqa: E402

NCERT = os.environ["NCERT_BINARY"]
MPIRUN = shutil.which("mpirun")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def html_parts(page):
    """data-part -> the HTML of that part's <details> block (a campaign's entry, a command's subject)."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'<details class="part [a-z]+" data-part="([^"]*)"', page)]
    out = {}
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else page.index("</body>")
        out[name] = page[start:end]
    return out


def html_sections(page):
    """(class, data attribute, its value) -> the <svg> elements of each such section, in order."""
    out = {}
    for m in re.finditer(r'<section class="(subject [a-z]+|fork)" data-(subject|check)="([^"]*)"[^>]*>(.*?)</section>',
                         page, re.S):
        out.setdefault((m.group(1), m.group(2), m.group(3)), []).append(re.findall(r"<svg.*?</svg>", m.group(4), re.S))
    return out


def run(args, cwd, env=None, check_rc=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if check_rc is not None and r.returncode != check_rc:
        raise AssertionError(f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def parent_of(pid):
    """The parent of process `pid`, or -1 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def processes():
    """Every process still there, as (pid, argv, environment), each a list of bytes."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        yield int(entry), argv, env


class Campaign(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ncert-campaign-")
        d = cls.dir
        run([NCERT, "demo", "--dir", d, "--quiet"], d, check_rc=0)
        run([NCERT, "witness", "good.h5", "--out", "good.witness.h5", "--quiet"], d, check_rc=0)
        with open(os.path.join(d, "good.h5"), "rb") as f:
            data = f.read()
        with open(os.path.join(d, "corrupt.h5"), "wb") as f:
            f.write(data[: len(data) // 3])  # truncated: refused, exit 3 on its own
        # A logits run with no emission: its vacuity line, made from the workers' parts, must be
        # the one `ncert check` writes ("... 1 logits run(s), none with an emission").
        import h5py  # noqa: E402 (only this fixture needs it)
        with h5py.File(os.path.join(d, "empty-run.h5"), "w") as f:
            f.attrs.update({"ncert_schema": "ncert-dump", "ncert_schema_version": 1, "engine": "e", "build": "b"})
            g = f.create_group("logits/greedy")
            g.attrs["vocab"] = 16
            g.create_dataset("logits", shape=(0, 16), dtype="<f4")
            g.create_dataset("tokens", shape=(0,), dtype="<i4")
        dumps = sorted(n for n in os.listdir(d) if n.endswith(".h5") and not n.startswith(("fork-", "logits-"))
                       and n not in ("good.witness.h5",))
        entries = [{"id": n[:-3], "check": n} for n in dumps]
        entries[0]["strict"] = True
        entries += [
            {"id": "compare-logits", "compare": ["logits-a.h5", "logits-b.h5"], "policy": "ulp:4"},
            {"id": "forks-near-tie", "forks": ["fork-near-tie-a.h5", "fork-near-tie-b.h5"]},
            {"id": "witness-good", "witness": "good.h5"},
            {"id": "verify-good", "verify": ["good.witness.h5", "good.h5"]},
        ]
        cls.entries = entries
        cls.manifest = os.path.join(d, "campaign.json")
        with open(cls.manifest, "w") as f:
            json.dump({"ncert_campaign": 1, "name": "fixtures", "entries": entries}, f, indent=1)
        cls.reference = cls.campaign("ref", ["--workers", "2", "--threads", "2", "--html",
                                             os.path.join(d, "ref.html")])
        cls.own_runs = {}

    @classmethod
    def campaign(cls, tag, flags, launcher=(), env=None, resume=False):
        out = os.path.join(cls.dir, tag + ".json")
        journal = os.path.join(cls.dir, tag + ".journal")
        if not resume and os.path.exists(journal):
            os.remove(journal)
        args = (list(launcher) + [NCERT, "campaign", cls.manifest, "--journal", journal, "--json", out, "--quiet"]
                + flags)
        if resume:
            args.append("--resume")
        r = run(args, cls.dir, env=env)
        assert r.returncode == 1, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"  # the corrupt dump fails
        with open(out) as f:
            return json.load(f)

    @classmethod
    def own_run(cls, e):
        """The entry's own command, run once: (exit code, JSON report, HTML page)."""
        if e["id"] not in cls.own_runs:
            kind = next(k for k in ("check", "compare", "forks", "witness", "verify") if k in e)
            out = os.path.join(cls.dir, "own-" + e["id"])
            # The manifest's paths resolve against its directory: the same absolute paths here.
            paths = [os.path.join(cls.dir, p) for p in ([e[kind]] if isinstance(e[kind], str) else e[kind])]
            if kind == "check":
                args = ["check"] + paths + (["--strict"] if e.get("strict") else [])
            elif kind == "compare":
                args = ["compare"] + paths + ["--policy", e["policy"]]
            elif kind == "forks":
                args = ["forks"] + paths
            elif kind == "witness":
                args = ["witness"] + paths
            else:
                args = ["witness", "--verify"] + paths
            r = run([NCERT] + args + ["--json", out + ".json", "--html", out + ".html", "--quiet"], cls.dir)
            with open(out + ".json") as f, open(out + ".html", encoding="utf-8") as g:
                cls.own_runs[e["id"]] = (r.returncode, json.load(f), g.read())
        return cls.own_runs[e["id"]]

    def test_a_refused_entry_names_its_error_and_code_in_the_campaign_lines(self):
        # Its own report says "REFUSED  error hdf5 (202): ..."; the campaign's line for it said
        # the message alone (a reviewer's), with no error name or code.
        checks = {c["id"]: c for c in self.reference["checks"]}
        reason = checks["corrupt/schema"]["reason"]
        self.assertTrue(reason.startswith("input refused: error "), reason)
        self.assertRegex(reason, r"^input refused: error [a-z0-9-]+ \(\d{3}\): ")

    def test_entries_equal_their_own_commands(self):
        by_id = {e["id"]: e for e in self.reference["entries"]}
        for e in self.entries:
            code, own, _ = self.own_run(e)
            with self.subTest(entry=e["id"]):
                self.assertEqual(by_id[e["id"]]["exit_code"], code)
                self.assertEqual(strip_timing(by_id[e["id"]]["report"]), strip_timing(own))

    def test_the_html_page_draws_every_plot_of_every_entry_own_page(self):
        """Each evidence section of an entry's own page (a projection's histograms and failure map,
        a run's margin histograms, a compare's series, a fork) is in the campaign's page under the
        entry's id, with the same plots byte for byte, and the campaign's page has no other plot."""
        with open(os.path.join(self.dir, "ref.html"), encoding="utf-8") as f:
            page = f.read()
        campaign = html_sections(page)
        plots = 0
        kinds = set()
        for e in self.entries:
            _, _, own_page = self.own_run(e)
            own = html_sections(own_page)
            with self.subTest(entry=e["id"]):
                for (css, attr, value), svgs in own.items():
                    self.assertEqual(campaign.get((css, attr, e["id"] + "/" + value)), svgs, (css, value))
                    kinds.add(css)
                self.assertEqual(own_page.count("<svg"), sum(len(s) for v in own.values() for s in v))
            plots += own_page.count("<svg")
        self.assertEqual(kinds, {"subject projection", "subject witnesses", "subject logits", "fork"})
        self.assertGreater(plots, 0)
        self.assertEqual(page.count("<svg"), plots)
        for plot in ("plot bound-hist", "plot fail-grid", "plot margin-hist", "plot series"):
            self.assertIn(plot, page)

    def test_each_entry_part_of_the_page_holds_exactly_its_own_page_sections(self):
        """The campaign's page has one part per entry (its summary row, then its block: open when
        it failed), and each entry's block holds the same evidence sections as the entry's own
        page, in the same number, with as many plots: nothing of another entry, nothing lost."""
        with open(os.path.join(self.dir, "ref.html"), encoding="utf-8") as f:
            page = f.read()
        parts = html_parts(page)
        self.assertEqual(sorted(parts), sorted(e["id"] for e in self.entries))
        verdicts = {e["id"]: e["verdict"] for e in self.reference["entries"]}
        rows = re.findall(r'<tr class="part [a-z]+" data-part="([^"]*)" data-verdict="([A-Z/]+)"', page)
        self.assertEqual(sorted(rows), sorted(verdicts.items()))
        self.assertEqual([v for _, v in rows], sorted((v for _, v in rows), key=lambda v: v != "FAIL"))
        self.assertLess(page.index('<section id="summary">'), page.index("<details"))
        for e in self.entries:
            _, own, own_page = self.own_run(e)
            block = parts[e["id"]]
            with self.subTest(entry=e["id"]):
                self.assertEqual(' open>' in block.split(">", 1)[0] + ">", verdicts[e["id"]] == "FAIL")
                mine = html_sections(block)
                theirs = html_sections(own_page)
                self.assertEqual(sorted((css, value) for css, _, value in mine),
                                 sorted((css, e["id"] + "/" + value) for css, _, value in theirs))
                self.assertEqual(block.count("<svg"), own_page.count("<svg"))
                self.assertEqual(block.count('<tr class="check '), len(own["checks"]))
                failing = sum(c["verdict"] == "FAIL" for c in own["checks"])
                self.assertEqual(block.count('<tr class="check fail'), failing)

    def test_a_journal_of_another_wire_version_is_refused(self):
        """A journal whose header declares results in another wire form (an ncert that wrote them
        otherwise) stops --resume with a usage error before any of its results is read. (A journal
        of format 1, before lines carried checksums, is not refused: journal_test.py.)"""
        with open(os.path.join(self.dir, "ref.journal")) as f:
            header = json.loads(f.readline())
        self.assertEqual(header["line"]["wire"], 17)
        header["line"]["wire"] = 5  # the form before declaration trials carried their effect
        journal = os.path.join(self.dir, "old-wire.journal")
        with open(journal, "w") as f:
            f.write(json.dumps(header, separators=(",", ":")) + "\n")
        r = run([NCERT, "campaign", self.manifest, "--journal", journal, "--resume", "--quiet"], self.dir)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("wire format 5", r.stdout + r.stderr)

    def test_the_corrupt_dump_is_one_failed_entry_of_a_finished_campaign(self):
        by_id = {e["id"]: e for e in self.reference["entries"]}
        self.assertEqual(len(by_id), len(self.entries))
        self.assertEqual(by_id["corrupt"]["exit_code"], 3)
        self.assertIn("error", by_id["corrupt"]["report"])
        self.assertEqual(by_id["good"]["verdict"], "PASS")
        self.assertEqual(self.reference["verdict"], "FAIL")

    def test_workers_and_threads_do_not_change_the_report(self):
        for tag, flags in (("w1t1", ["--workers", "1", "--threads", "1"]),
                           ("w2t1", ["--workers", "2", "--threads", "1"])):
            with self.subTest(flags=flags):
                self.assertEqual(strip_timing(self.campaign(tag, flags)), strip_timing(self.reference))

    @needs(MPIRUN, "mpirun not installed (openmpi-bin): no MPI campaign to run")
    def test_three_mpi_ranks_give_the_same_report(self):
        got = self.campaign("mpi3", ["--threads", "1"], launcher=[MPIRUN, "-n", "3", "--oversubscribe"], env=MPI_ENV)
        self.assertEqual(strip_timing(got), strip_timing(self.reference))

    def test_a_killed_campaign_resumes_to_the_same_report(self):
        tag = "killed"
        journal = os.path.join(self.dir, tag + ".journal")
        if os.path.exists(journal):
            os.remove(journal)
        out = os.path.join(self.dir, tag + ".json")
        p = subprocess.Popen([NCERT, "campaign", self.manifest, "--journal", journal, "--json", out, "--quiet",
                              "--workers", "1"], cwd=self.dir, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill the whole job (supervisor and its item processes) after a few items are done.
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(journal) if os.path.exists(journal) else open(os.devnull) as f:
                if sum(1 for _ in f) >= 4:
                    break
            time.sleep(0.005)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        with open(journal) as f:
            done = sum(1 for _ in f) - 1
        self.assertGreaterEqual(done, 3)
        self.assertFalse(os.path.exists(out), "a killed campaign must not leave a report")
        got = self.campaign(tag, ["--workers", "2"], resume=True)
        self.assertEqual(strip_timing(got), strip_timing(self.reference))
        self.assertLess(done, got["stats"]["work_items"], "the kill came after the campaign ended")

    def start_mpi_campaign(self, tag):
        """Starts the campaign on 3 MPI ranks with journal TAG.journal and report TAG.json (both
        removed first): the launcher's process, the journal's path and the report's."""
        journal = os.path.join(self.dir, tag + ".journal")
        out = os.path.join(self.dir, tag + ".json")
        for path in (journal, out):
            if os.path.exists(path):
                os.remove(path)
        p = subprocess.Popen([MPIRUN, "-n", "3", "--oversubscribe", NCERT, "campaign", self.manifest, "--journal",
                              journal, "--json", out, "--quiet", "--threads", "1"], cwd=self.dir,
                             env=dict(os.environ, **MPI_ENV), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        return p, journal, out

    def resume_mpi_campaign(self, tag):
        """Resumes start_mpi_campaign's campaign TAG on 2 MPI ranks to its end: its report."""
        return self.campaign(tag, ["--threads", "1"], launcher=[MPIRUN, "-n", "2", "--oversubscribe"], env=MPI_ENV,
                             resume=True)

    @staticmethod
    def once_journaled(p, journal, lines, find):
        """Polls, while the launcher `p` runs (up to 60 s), until the journal holds `lines` lines
        and `find()` returns a pid; that pid, or None."""
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            held = 0
            if os.path.exists(journal):
                with open(journal) as f:
                    held = sum(1 for _ in f)
            if held >= lines:
                pid = find()
                if pid is not None:
                    return pid
            time.sleep(0.002)
        return None

    @needs(MPIRUN, "mpirun not installed (openmpi-bin): no MPI campaign to run")
    def test_a_worker_rank_that_dies_stops_the_job_and_resume_finishes_it(self):
        """SIGKILL of a worker rank (not of an item: items run in their own children) takes the
        MPI job down, as OpenMPI does; the journal keeps what finished and --resume on another
        rank count gives the uninterrupted report."""
        tag = "rankdeath"
        p, journal, out = self.start_mpi_campaign(tag)

        def worker_rank():
            # A worker rank is the ncert whose children are items.
            for pid, argv, _ in processes():
                if argv and argv[0] == NCERT.encode() and b"campaign" in argv:
                    parent = parent_of(pid)
                    if parent != p.pid and parent_of(parent) == p.pid:
                        return parent
            return None

        # Kill the rank itself after the journal shows a few finished items.
        victim = self.once_journaled(p, journal, 4, worker_rank)
        self.assertIsNotNone(victim, "no worker rank with a running item was seen")
        os.kill(victim, signal.SIGKILL)
        output = p.communicate(timeout=120)[0].decode(errors="replace")
        self.assertNotEqual(p.returncode, 0, output)
        self.assertIn("signal 9", output)  # mpirun names the rank that died
        self.assertFalse(os.path.exists(out), "a campaign whose rank died must not leave a report")
        with open(journal) as f:
            done = sum(1 for _ in f) - 1
        self.assertGreaterEqual(done, 3)
        got = self.resume_mpi_campaign(tag)
        self.assertEqual(strip_timing(got), strip_timing(self.reference))
        self.assertLess(done, got["stats"]["work_items"], "the rank died after the campaign ended")

    @needs(MPIRUN, "mpirun not installed (openmpi-bin): no MPI campaign to run")
    def test_sigterm_to_rank_0_says_so_and_resume_finishes_it(self):
        """Rank 0 stopped by SIGTERM says so on stderr, as a local campaign does (it died by the
        default action without a word: a review's), writes no report, and keeps its journal."""
        tag = "rank0stop"
        p, journal, out = self.start_mpi_campaign(tag)

        def rank_0():
            for pid, _, env in processes():
                if b"OMPI_COMM_WORLD_RANK=0" in env and parent_of(pid) == p.pid:
                    return pid
            return None

        root = self.once_journaled(p, journal, 3, rank_0)
        self.assertIsNotNone(root, "rank 0 was not seen while the campaign ran")
        os.kill(root, signal.SIGTERM)
        output = p.communicate(timeout=120)[0].decode(errors="replace")
        self.assertNotEqual(p.returncode, 0, output)
        self.assertIn("campaign interrupted by SIGTERM: finished items are in the journal; --resume continues",
                      output)
        self.assertFalse(os.path.exists(out), "a stopped campaign must not leave a report")
        got = self.resume_mpi_campaign(tag)
        self.assertEqual(strip_timing(got), strip_timing(self.reference))

    def test_a_finished_campaign_reruns_afresh_over_its_journal(self):
        # docs/campaigns.md: without --resume a campaign starts afresh and replaces the journal
        # it finds there once it has started; nothing has to be removed first.
        journal = os.path.join(self.dir, "ref.journal")
        self.assertTrue(os.path.exists(journal))
        r = run([NCERT, "campaign", self.manifest, "--journal", journal, "--quiet"], self.dir)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertNotIn("--resume", r.stdout + r.stderr)
        self.assertTrue(os.path.exists(journal))


if __name__ == "__main__":
    unittest.main()
