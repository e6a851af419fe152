"""The reader's limits outside its rule table (ncert_dump/limits.py): each equals the constant of
the C++ source it names, and the writer refuses at the call what crosses one, with the reader's
error name, path and sentence, instead of closing a file `ncert inspect` refuses."""

from __future__ import annotations

import ast
import operator
import os
import re
import unittest
from unittest import mock

import h5py
import numpy as np

from ncert_dump import DumpFormatError, DumpWriter, h5out, limits, rules
from ncert_dump.build import build_logits, build_tensor

from .support import HAVE_NCERT, REPO, TempDirCase, base_projection, ncert_json, write_raw

_OPS = {ast.LShift: operator.lshift, ast.Sub: operator.sub, ast.Add: operator.add,
        ast.Mult: operator.mul}


def _value(expr: str) -> int:
    """A C++ integer constant expression of literals, <<, +, - and * (digit separators and
    Index{1} allowed), evaluated without eval()."""
    text = re.sub(r"\w+\{(\d+)\}", r"\1", expr.replace("'", ""))

    def walk(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"not a constant expression: {expr!r}")
    return walk(ast.parse(text, mode="eval").body)


def cxx_constant(source: str, name: str) -> int:
    """The value a C++ declaration `... name = <expr>;` gives in `source` (relative to the
    repository)."""
    with open(os.path.join(REPO, source)) as f:
        found = re.findall(rf"\b{name}\s*=\s*([^;]+);", f.read())
    if len(found) != 1:
        raise AssertionError(f"{source}: {len(found)} declarations of {name}")
    return _value(found[0])


class LimitsAreTheReaders(unittest.TestCase):
    def test_each_limit_is_the_cxx_constant(self):
        for mirrored, (source, name) in {
            "MAX_ATTRIBUTE_BYTES": ("certify/io/detail/hdf5_util.cc", "kMaxAttrBytes"),
            "MAX_SMALL_CHUNKS": ("certify/io/dump_reader.h", "kMaxSmallChunks"),
            "SMALL_CHUNK_BYTES": ("certify/io/dump_reader.h", "kSmallChunkBytes"),
            "MAX_TREE_DEPTH": ("certify/io/dump_reader.h", "max_depth"),
            "MAX_LINKS": ("certify/io/dump_reader.h", "max_objects"),
            "MAX_SHAPE_VALUE": ("certify/io/schema_rules.h", "kMaxShapeValue"),
        }.items():
            self.assertEqual(getattr(limits, mirrored), cxx_constant(source, name), mirrored)

    def test_the_expression_reader(self):
        self.assertEqual(_value("1 << 20"), 1 << 20)
        self.assertEqual(_value("65'536"), 65536)
        self.assertEqual(_value("(Index{1} << 32) - 1"), (1 << 32) - 1)


def _logits(t=3, v=5):
    lg = np.random.default_rng(1).standard_normal((t, v)).astype(np.float32)
    return dict(tokens=lg.argmax(axis=1).astype(np.int32), logits=lg)


class LimitRefusals(TempDirCase):
    """Each limit refused by the writer at the call; the value at the limit accepted."""

    def writer(self):
        w = DumpWriter(self.tmp(), engine="test", build="unit")
        self.addCleanup(w.abort)
        return w

    def refused(self, call, name, path, message):
        with self.assertRaises(DumpFormatError) as cm:
            call()
        self.assertEqual((cm.exception.name, cm.exception.path, cm.exception.message),
                         (name, path, message))
        return cm.exception

    # ---- string attributes over 1 MiB ----

    TOO_LARGE = " is larger than an attribute may be (1 MiB or 65,536 elements, docs/dump-format.md §1)"

    def test_an_oversized_prompt_is_refused_and_one_of_exactly_the_limit_written(self):
        w = self.writer()
        prompt = "語" * 400_000  # 1,200,000 bytes of UTF-8
        self.refused(lambda: w.add_logits_run("g", prompt=prompt, **_logits()), "attribute-invalid",
                     "/logits/g", 'attribute "prompt" = <oversized: 1200000 bytes>' + self.TOO_LARGE)
        w.add_logits_run("g", prompt="a" * limits.MAX_ATTRIBUTE_BYTES, **_logits())
        w.close()
        with h5py.File(self.tmp(), "r") as f:
            self.assertEqual(len(f["/logits/g"].attrs["prompt"]), limits.MAX_ATTRIBUTE_BYTES)

    def test_oversized_root_attributes_are_refused_before_any_file(self):
        big = "e" * (limits.MAX_ATTRIBUTE_BYTES + 1)
        for attr in ("engine", "build", "model", "device"):
            kw = dict(engine="test", build="unit")
            kw[attr] = big
            self.refused(lambda: DumpWriter(self.tmp(), engine=kw["engine"], build=kw["build"],
                                            model=kw.get("model"), device=kw.get("device")),
                         "attribute-invalid", "/",
                         f'attribute "{attr}" = <oversized: {len(big)} bytes>' + self.TOO_LARGE)
            self.assertEqual(os.listdir(self.dir), [])

    def test_an_oversized_role_is_refused(self):
        w = self.writer()
        kw = base_projection()
        kw["role"] = "r" * (limits.MAX_ATTRIBUTE_BYTES + 1)
        self.refused(lambda: w.add_projection("q", **kw), "attribute-invalid", "/projections/q",
                     f'attribute "role" = <oversized: {limits.MAX_ATTRIBUTE_BYTES + 1} bytes>' + self.TOO_LARGE)

    # ---- extents ----

    def test_an_extent_above_2_32_is_refused(self):
        # test_rule_parity plants this in every extent and count of the table, against the reader.
        w = self.writer()
        kw = base_projection()
        kw["cap"] = 2**33
        self.refused(lambda: w.add_projection("q", **kw), "shape-limit", "/projections/q",
                     'attribute "cap" = 8589934592 is above 4294967295 (2^32 - 1), the largest '
                     "extent ncert accepts; refused before any size is computed from it")
        kw["cap"] = limits.MAX_SHAPE_VALUE
        w.add_projection("q", **kw)

    # ---- chunk bombs ----

    def test_many_tiny_chunks_are_refused(self):
        w = self.writer()
        run = _logits(66_000, 16)
        self.refused(
            lambda: w.add_logits_run("g", chunk_rows=1, **run), "chunk-bomb", "/logits/g/logits",
            "declares [66000, 16] in chunks of [1, 16] (64 bytes each): 66000 chunks, over the "
            "65536 allowed under 1024 bytes each: its chunk index outweighs its data; refused "
            "before reading; rewrite it with chunks of whole rows")
        self.assertNotIn("logits", w._file)
        w.add_logits_run("g", chunk_rows=2, **run)  # 33,000 chunks
        w.add_logits_run("h", chunk_rows=1, **_logits(66_000, 256))  # chunks of 1 KiB

    # ---- the group tree ----

    def test_a_tensor_nested_32_deep_is_refused_and_31_deep_written(self):
        w = self.writer()
        deep = "/".join(["kv"] * limits.MAX_TREE_DEPTH)
        self.refused(lambda: w.add_tensor(deep, np.zeros(2, np.float32)), "tree-limit",
                     "/tensors/" + "/".join(["kv"] * (limits.MAX_TREE_DEPTH - 1)),
                     "groups nested deeper than 32 levels (a dump needs 4); refused without walking "
                     "further")
        self.assertNotIn("tensors", w._file)
        w.add_tensor("/".join(["kv"] * (limits.MAX_TREE_DEPTH - 1)), np.zeros(2, np.float32))

    def test_links_beyond_the_limit_are_refused(self):
        # The reader counts every link below the root: /tensors and each tensor here. With the
        # limit lowered to 4: /tensors, t0, t1, t2 are written, t3 would be the fifth link.
        w = self.writer()
        with mock.patch.object(limits, "MAX_LINKS", 4):
            for i in range(3):
                w.add_tensor(f"t{i}", np.zeros(1, np.float32))
            self.refused(lambda: w.add_tensor("t3", np.zeros(1, np.float32)), "tree-limit",
                         "/tensors", "more than 4 links in the file (a whole model's dump has a "
                         "few thousand); refused")
            # A projection is many links: /projections, q, its datasets, weight and segments.
            self.refused(lambda: w.add_projection("q", **base_projection()), "tree-limit",
                         "/projections", "more than 4 links in the file (a whole model's dump "
                         "has a few thousand); refused")
        self.assertEqual(sorted(w._file["tensors"]), ["t0", "t1", "t2"])
        self.assertNotIn("projections", w._file)


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class ReaderRefusesTheSame(TempDirCase):
    """The objects the writer refused, written without validation: `ncert inspect` refuses them
    with the same name, path and sentence."""

    def writer_error(self, call) -> DumpFormatError:
        w = DumpWriter(self.tmp("writer.h5"), engine="test", build="unit")
        self.addCleanup(w.abort)
        with self.assertRaises(DumpFormatError) as cm:
            call(w)
        return cm.exception

    def assert_reader_refuses(self, e: DumpFormatError, path: str):
        code, report = ncert_json("inspect", path)
        found = [(f["code"], f["path"], f["message"]) for f in report.get("findings", [])
                 if f["severity"] == "error"]
        self.assertIn((e.name, e.path, e.message), found)
        self.assertEqual(code, 3)

    def test_oversized_prompt(self):
        kw = dict(_logits(), positions=None, prompt_tokens=None, prompt="語" * 400_000,
                  tie_break=None, chunk_rows=None, compression=None, vocab=None)
        e = self.writer_error(lambda w: w.add_logits_run("g", **kw))
        write_raw(self.tmp(), {"/logits/g": build_logits("/logits/g", **kw)})
        self.assert_reader_refuses(e, self.tmp())

    def test_oversized_engine(self):
        engine = "e" * (limits.MAX_ATTRIBUTE_BYTES + 1)
        with self.assertRaises(DumpFormatError) as cm:
            DumpWriter(self.tmp("writer.h5"), engine=engine, build="unit")
        with h5py.File(self.tmp(), "w") as f:
            h5out.write_attrs(f, {"ncert_schema": "ncert-dump",
                                  "ncert_schema_version": max(rules.VERSIONS),
                                  "engine": engine, "build": "raw"})
        self.assert_reader_refuses(cm.exception, self.tmp())

    def test_chunk_bomb(self):
        kw = dict(_logits(66_000, 16), positions=None, prompt_tokens=None, prompt=None,
                  tie_break=None, chunk_rows=1, compression=None, vocab=None)
        e = self.writer_error(lambda w: w.add_logits_run("g", **kw))
        write_raw(self.tmp(), {"/logits/g": build_logits("/logits/g", **kw)})
        self.assert_reader_refuses(e, self.tmp())

    def test_deep_tensor(self):
        name = "/".join(["kv"] * limits.MAX_TREE_DEPTH)
        e = self.writer_error(lambda w: w.add_tensor(name, np.zeros(2, np.float32)))
        node = build_tensor("/tensors/" + name, np.zeros(2, np.float32), None, None)
        write_raw(self.tmp(), {f"/tensors/{name}": node})
        self.assert_reader_refuses(e, self.tmp())

    def test_the_deepest_tensor_written_loads(self):
        with DumpWriter(self.tmp(), engine="test", build="unit") as w:
            w.add_tensor("/".join(["kv"] * (limits.MAX_TREE_DEPTH - 1)), np.zeros(2, np.float32))
        code, report = ncert_json("inspect", self.tmp())
        self.assertEqual(code, 0, report)


if __name__ == "__main__":
    unittest.main()
