"""Corrupt dumps that crash or hang libhdf5 are refused, not fatal.

Debian's libhdf5 1.10 dies (SIGSEGV in H5HG_read reading variable-length string attributes
through a corrupt global heap; SIGSEGV in H5Fclose's cache teardown after a corrupt attribute
message) or loops (H5HG/H5C, on zeroed global-heap blocks) on some corrupt files. This test finds
such files itself instead of shipping them: it writes deterministic mutants of two `ncert demo`
dumps with the mutation runner's own functions (tools/fuzz/mutants.py; --seed 1, the indices
below), runs each with NCERT_ISOLATION=off (ncert in-process, as a debugger sees it) and keeps
those that really die by a signal or hang. It then requires at least one of each and runs the
normal, isolated binary on exactly those: exit 3, a REFUSED line naming hdf5-crashed (203) or
hdf5-hung (204) and what was being read, a JSON report with that error, and no temporary report
file left behind.

The indices were chosen by running them: with the demo dumps of this repository, good.h5
mutants 0-99 hold SIGSEGVs (9, 45, 72, 99; 9 in H5HG_read) and two global-heap loops (49, 90), and
af4-scale-x2.h5 mutants 0-39 hold the one-flip attribute message that crashes H5Fclose (19).
If the demo's dumps change, the crashing mutants move; the assertions say so rather than pass
with nothing tested.
"""
import concurrent.futures
import os
import re
import signal
import unittest

import hostile_support as hs
from h5map import H5Map
from mutants import KINDS, Seed, describe, make_mutant

MUTATE_SEED = 1
SCAN = (("good.h5", range(0, 100)), ("af4-scale-x2.h5", range(0, 40)))
UNISOLATED_TIMEOUT = 5.0     # s; a clean inspect of a demo dump takes ~0.05 s
UNISOLATED_AS = 4 << 30      # RLIMIT_AS: a mutant that makes libhdf5 allocate gigabytes fails
ISOLATED_HDF5_TIMEOUT = 3    # --hdf5-timeout for the isolated runs
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS)


class HostileMutants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = hs.scratch("mutants")
        if not hs.NCERT:
            return
        dumps = hs.demo_dumps(os.path.join(cls.dir, "demo"))
        mdir = os.path.join(cls.dir, "mutants")
        os.makedirs(mdir)
        to_run = []
        for seed_name, indices in SCAN:
            with open(dumps[seed_name], "rb") as f:
                raw = bytearray(f.read())
            fixed = H5Map(bytes(raw)).normalize(raw)
            seed = Seed(dumps[seed_name], seed_name, raw, True, fixed)
            for k in indices:
                kind = KINDS[k % len(KINDS)]
                data, mutation = make_mutant(seed, MUTATE_SEED, k, kind)
                path = os.path.join(mdir, "%s.%04d.%s.h5" % (seed.stem, k, kind))
                with open(path, "wb") as f:
                    f.write(data)
                to_run.append((path, describe(mutation)))

        def unisolated(item):
            path, desc = item
            r = hs.run(["inspect", path, "--threads", "1"], timeout=UNISOLATED_TIMEOUT,
                       env={"NCERT_ISOLATION": "off"}, address_space=UNISOLATED_AS)
            return path, desc, r

        cls.crashes, cls.hangs = [], []
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for path, desc, r in pool.map(unisolated, to_run):
                if r.hung:
                    cls.hangs.append((path, desc))
                elif r.returncode is not None and -r.returncode in CRASH_SIGNALS:
                    # Kept only if it crashes again: a read past a buffer can crash or not with
                    # the heap's layout, and the isolated run must meet the same crash.
                    again = unisolated((path, desc))[2]
                    if again.returncode == r.returncode:
                        cls.crashes.append((path, desc, signal.Signals(-r.returncode).name))
                else:
                    os.remove(path)
        cls.scanned = len(to_run)

    def setUp(self):
        hs.require_binary(self)

    def found(self):
        return "found in %d mutants: crashes %s; hangs %s" % (
            self.scanned, [os.path.basename(c[0]) for c in self.crashes],
            [os.path.basename(h[0]) for h in self.hangs])

    def test_unisolated_libhdf5_crashes_on_some_mutants(self):
        self.assertGreaterEqual(len(self.crashes), 1, "no mutant crashed libhdf5 in-process; "
                                "the fixed indices no longer reach the known bugs: " + self.found())

    def test_unisolated_libhdf5_hangs_on_some_mutants(self):
        self.assertGreaterEqual(len(self.hangs), 1, "no mutant hung libhdf5 in-process: " +
                                self.found())

    def check_isolated(self, command, path, expect_code, expect_name):
        out_dir = os.path.join(self.dir, "reports", command)
        os.makedirs(out_dir, exist_ok=True)
        report = os.path.join(out_dir, os.path.basename(path)[:-3] + ".json")
        r = hs.run([command, path, "--json", report, "--threads", "1",
                    "--hdf5-timeout", ISOLATED_HDF5_TIMEOUT], timeout=60)
        message = ""  # what the REFUSED line says; stays empty where the subtest fails first
        with self.subTest(command=command, mutant=os.path.basename(path)):
            self.assertFalse(r.hung, r.describe())
            self.assertEqual(r.returncode, 3, r.describe())
            refused = r.refused()
            self.assertIsNotNone(refused, "no REFUSED line\n" + r.describe())
            name, code, message = refused
            self.assertEqual((name, code), (expect_name, expect_code), r.describe())
            # what was being read: "while reading /projections/x in FILE", "while closing FILE",
            # "while reading the root attributes of FILE"
            self.assertRegex(message, r"while [a-z ]+ .*" + re.escape(os.path.basename(path)),
                             r.describe())
            doc = hs.load_report(report)
            self.assertEqual(doc["error"]["code"], expect_code, doc)
            self.assertEqual(doc["error"]["name"], expect_name, doc)
            self.assertEqual(hs.temp_leftovers(out_dir), [])
        return message

    def test_isolated_binary_refuses_the_crashing_mutants(self):
        if not self.crashes:
            self.fail("nothing to run: " + self.found())
        messages = []
        for path, _, _ in self.crashes:
            for command in ("inspect", "check"):
                messages.append(self.check_isolated(command, path, 203, "hdf5-crashed"))
        # at least one names the object being read when the library died, and one died in
        # H5Fclose, after the work (af4-scale-x2 mutant 19: one flip in an attribute message)
        self.assertTrue(any(re.search(r"while reading /\S+ in ", m) for m in messages), messages)
        self.assertTrue(any(m.startswith("the HDF5 library crashed (SIGSEGV) while closing ")
                            for m in messages), messages)

    def test_isolated_binary_refuses_the_hanging_mutants(self):
        if not self.hangs:
            self.fail("nothing to run: " + self.found())
        for path, _ in self.hangs:
            for command in ("inspect", "check"):
                message = self.check_isolated(command, path, 204, "hdf5-hung")
                if message:  # else its subtest has failed already, saying why
                    self.assertIn("no progress for %d s" % ISOLATED_HDF5_TIMEOUT, message)


if __name__ == "__main__":
    unittest.main()
