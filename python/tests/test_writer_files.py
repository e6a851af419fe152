"""The writer's arguments and files: every refusal is a DumpFormatError raised at the call, and a
refused or failed call leaves nothing behind, on disk or in the dump."""

from __future__ import annotations

import os
import unittest
from unittest import mock

import h5py
import numpy as np

from ncert_dump import DumpFormatError, DumpWriter, h5out

from .support import HAVE_NCERT, TempDirCase, base_projection, ncert_json

BAD = "q\udcff"  # a lone surrogate: a str that UTF-8, and so HDF5, cannot hold


class Arguments(TempDirCase):
    def refused(self, call, name, *fragments):
        with self.assertRaises(DumpFormatError) as cm:
            call()
        self.assertEqual(cm.exception.name, name, str(cm.exception))
        for f in fragments:
            self.assertIn(f, cm.exception.message)
        str(cm.exception).encode("utf-8")  # the message itself can be printed
        return cm.exception

    def writer(self):
        w = DumpWriter(self.tmp(), engine="e", build="b")
        self.addCleanup(w.abort)
        return w

    def logits(self, **changes):
        lg = np.ones((2, 5), np.float32)
        return dict(dict(tokens=np.zeros(2, np.int32), logits=lg), **changes)

    def test_lone_surrogates_in_names_are_refused_at_the_call(self):
        w = self.writer()
        self.refused(lambda: w.add_projection(BAD, **base_projection()), "invalid-argument",
                     "projection name", "UTF-8")
        self.refused(lambda: w.add_logits_run(BAD, **self.logits()), "invalid-argument",
                     "logits run name", "UTF-8")
        self.refused(lambda: w.add_tensor("a/" + BAD, np.zeros(2, np.float32)),
                     "invalid-argument", "tensor name", "UTF-8")
        kw = base_projection()
        kw["weights"][0].name = BAD
        self.refused(lambda: w.add_projection("q", **kw), "invalid-argument", "segment name",
                     "UTF-8")
        self.assertEqual(list(w._file), [])  # no group was created for any of them
        w.add_projection("q", **base_projection())
        w.close()

    def test_lone_surrogates_in_strings_are_refused_at_the_call(self):
        self.refused(lambda: DumpWriter(self.tmp(), engine=BAD, build="b"), "invalid-argument",
                     'attribute "engine"', "U+DCFF", "UTF-8")
        self.assertEqual(os.listdir(self.dir), [])
        w = self.writer()
        self.refused(lambda: w.add_logits_run("r", **self.logits(prompt=BAD)), "invalid-argument",
                     'attribute "prompt"', "U+DCFF at offset 1")
        kw = base_projection()
        kw["role"] = BAD
        self.refused(lambda: w.add_projection("q", **kw), "invalid-argument", 'attribute "role"')
        self.refused(lambda: w.add_tensor("t", np.zeros(2, np.float32), compare=BAD),
                     "invalid-argument", 'attribute "compare"')  # before its grammar
        self.assertEqual(list(w._file), [])

    def test_a_bytes_or_path_like_path_is_a_path(self):
        with DumpWriter(os.fsencode(self.tmp("a.h5")), engine="e", build="b") as w:
            w.add_tensor("t", np.zeros(2, np.float32))
        self.assertEqual(w.path, self.tmp("a.h5"))
        self.assertTrue(os.path.isfile(self.tmp("a.h5")))
        self.refused(lambda: DumpWriter(3, engine="e", build="b"),
                     "invalid-argument", "a path", "int")

    def test_a_directory_is_refused_at_once_whatever_overwrite_says(self):
        os.mkdir(self.tmp())
        for overwrite in (False, True):
            self.refused(lambda: DumpWriter(self.tmp(), engine="e", build="b", overwrite=overwrite),
                         "not-regular-file", "is a directory")
        self.assertEqual(os.listdir(self.dir), ["dump.h5"])
        self.assertTrue(os.path.isdir(self.tmp()))

    def test_a_failed_move_at_close_leaves_nothing(self):
        w = DumpWriter(self.tmp(), engine="e", build="b", overwrite=True)
        os.mkdir(self.tmp())  # the name became a directory while the dump was written
        with open(os.path.join(self.tmp(), "x"), "w"):
            pass
        self.refused(w.close, "io", "cannot move the finished dump")
        self.assertEqual(os.listdir(self.dir), ["dump.h5"])
        self.assertTrue(w.closed)


def _half_then_fail(parent, name, node):
    """h5out.write_node that fails halfway, as a full disk would."""
    h5out.create_group(parent, name)
    raise OSError("No space left on device")


class NoTrace(TempDirCase):
    """A failed call leaves no trace in the dump; an unfinished dump is not a dump."""

    def test_a_failed_write_removes_the_groups_it_created(self):
        w = DumpWriter(self.tmp(), engine="e", build="b")
        self.addCleanup(w.abort)
        with mock.patch.object(h5out, "write_node", _half_then_fail):
            for call in (lambda: w.add_tensor("a/b/c", np.zeros(2, np.float32)),
                         lambda: w.add_projection("q", **base_projection()),
                         lambda: w.add_logits_run("r", tokens=np.zeros(2, np.int32),
                                                  logits=np.ones((2, 5), np.float32))):
                with self.assertRaises(DumpFormatError) as cm:
                    call()
                self.assertEqual(cm.exception.name, "io")
                self.assertEqual(list(w._file), [])
        w.add_tensor("kept", np.zeros(2, np.float32))
        with mock.patch.object(h5out, "write_node", _half_then_fail):
            with self.assertRaises(DumpFormatError):
                w.add_tensor("x/y", np.zeros(2, np.float32))
        self.assertEqual(list(w._file["tensors"]), ["kept"])
        w.add_tensor("a/b/c", np.zeros(2, np.float32))  # the names are still free
        w.close()
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(sorted(f), ["tensors"])
            self.assertEqual(sorted(f["tensors"]), ["a", "kept"])

    def test_an_unfinished_dump_is_not_a_dump(self):
        # Until close(), the file under its temporary name has no ncert_schema: the reader
        # refuses it (schema-unknown) instead of reading an unfinished dump as a finished one.
        w = DumpWriter(self.tmp(), engine="e", build="b")
        self.addCleanup(w.abort)
        w.add_tensor("t", np.zeros(2, np.float32))
        w._file.flush()
        [partial] = os.listdir(self.dir)
        self.assertTrue(partial.startswith(".dump.h5.") and partial.endswith(".partial"), partial)
        with h5py.File(os.path.join(self.dir, partial), "r") as f:
            self.assertNotIn("ncert_schema", f.attrs)
        if HAVE_NCERT:
            code, report = ncert_json("inspect", os.path.join(self.dir, partial))
            self.assertEqual(code, 3)
            self.assertIn("schema-unknown", [f["code"] for f in report.get("findings", [])])
        w.close()
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(f.attrs["ncert_schema"], "ncert-dump")
        if HAVE_NCERT:
            code, report = ncert_json("inspect", self.tmp())
            self.assertEqual(code, 0, report)


class Symlinks(TempDirCase):
    """A symbolic link at `path` is followed, as open(path, "w") follows it: overwrite=True
    replaces the file it names and the link stays."""

    def test_overwrite_replaces_the_target_through_the_link(self):
        os.mkdir(self.tmp("elsewhere"))
        target = os.path.join(self.tmp("elsewhere"), "real.h5")
        with open(target, "wb"):
            pass
        os.symlink(target, self.tmp())
        with DumpWriter(self.tmp(), engine="new", build="b", overwrite=True) as w:
            w.add_tensor("t", np.zeros(2, np.float32))
            # the temporary file sits beside the target, so the final rename stays atomic
            self.assertEqual(len([f for f in os.listdir(self.tmp("elsewhere"))
                                  if f.startswith(".real.h5.") and f.endswith(".partial")]), 1)
        self.assertTrue(os.path.islink(self.tmp()))
        self.assertEqual(os.readlink(self.tmp()), target)
        self.assertEqual(sorted(os.listdir(self.tmp("elsewhere"))), ["real.h5"])
        with h5py.File(target, "r") as f:
            self.assertEqual(f.attrs["engine"], "new")

    def test_a_file_made_at_a_relative_name_after_a_chdir_is_not_replaced(self):
        # close() asks again whether the output exists: of the absolute name taken at the
        # start, the file the dump would replace, not of the relative name after a chdir.
        os.mkdir(self.tmp("a"))
        os.mkdir(self.tmp("b"))
        here = os.getcwd()
        self.addCleanup(os.chdir, here)
        os.chdir(self.tmp("a"))
        w = DumpWriter("out.h5", engine="e", build="b")
        w.add_tensor("t", np.zeros(2, np.float32))
        os.chdir(self.tmp("b"))
        with open(os.path.join(self.tmp("a"), "out.h5"), "w") as f:
            f.write("USER DATA")
        with self.assertRaises(DumpFormatError) as cm:
            w.close()
        self.assertEqual(cm.exception.name, "output-exists")
        with open(os.path.join(self.tmp("a"), "out.h5")) as f:
            self.assertEqual(f.read(), "USER DATA")
        self.assertEqual(os.listdir(self.tmp("b")), [])

    def test_a_link_is_an_existing_output_even_dangling(self):
        os.symlink(self.tmp("nowhere.h5"), self.tmp())
        with self.assertRaises(DumpFormatError) as cm:
            DumpWriter(self.tmp(), engine="e", build="b")
        self.assertEqual(cm.exception.name, "output-exists")
        self.assertEqual(sorted(os.listdir(self.dir)), ["dump.h5"])
        self.assertTrue(os.path.islink(self.tmp()))


if __name__ == "__main__":
    unittest.main()
