"""What the Python tests under tests/ share: the check that NCERT_BINARY names the built binary,
a scratch directory per test class, and a JSON report with its timings removed (the only values
that differ between two runs of the same inputs).

Scratch directories go under NCERT_TEST_TMP (CTest sets it) or a fresh temporary directory.

Tests that need something a machine may lack (a browser, MPI, a pseudo-terminal) skip with the
reason where it is missing; NCERT_TEST_NO_SKIP=1 (set by .ci/run: CI machines have all of them)
turns that skip into a failure, so CI never passes by skipping them.
"""
import os
import sys
import tempfile
import unittest

NO_SKIP = os.environ.get("NCERT_TEST_NO_SKIP") == "1"


def needs(available, reason):
    """A test decorator: the test runs when `available`, else it is skipped with `reason` (a
    failure naming it under NCERT_TEST_NO_SKIP=1)."""
    if available:
        return lambda test: test
    if not NO_SKIP:
        return unittest.skip(reason)

    def fail_instead(test):
        def failing(self):
            self.fail(reason + " (NCERT_TEST_NO_SKIP=1: this machine must have it)")
        failing.__name__ = test.__name__
        failing.__doc__ = test.__doc__
        return failing
    return fail_instead


def skip_whole_test(reason):
    """Ends a test program that cannot run at all here: exit 77, which CTest reports as skipped
    (SKIP_RETURN_CODE 77), with the reason on stdout; exit 1 under NCERT_TEST_NO_SKIP=1."""
    if NO_SKIP:
        print("FAIL: %s (NCERT_TEST_NO_SKIP=1: this machine must have it)" % reason)
        sys.exit(1)
    print("SKIP: " + reason)
    sys.exit(77)


def require_binary(test, ncert):
    """Fails `test` unless `ncert` names an executable file."""
    if not (ncert and os.path.isfile(ncert) and os.access(ncert, os.X_OK)):
        test.fail("NCERT_BINARY must name the built ncert binary (got %r)" % ncert)


def scratch(name, suite):
    """A fresh directory for one test class: NAME-* under NCERT_TEST_TMP, else ncert-SUITE-NAME-*
    in the system's temporary directory."""
    base = os.environ.get("NCERT_TEST_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
        return tempfile.mkdtemp(prefix=name + "-", dir=base)
    return tempfile.mkdtemp(prefix="ncert-%s-%s-" % (suite, name))


def strip_timing(j):
    """A JSON value without its timing_* keys, at every depth."""
    if isinstance(j, dict):
        return {k: strip_timing(v) for k, v in j.items() if not k.startswith("timing_")}
    if isinstance(j, list):
        return [strip_timing(v) for v in j]
    return j
