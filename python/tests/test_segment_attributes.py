"""A segment attribute its format (or variant) does not read is refused by the writer, naming the
segment, the attribute and the format: the reader would ignore it silently (dump-format.md §1.2),
and a dump that declares `dequant_op = "fma"` for an int8 segment says something of the kernel
that nothing checks. Which attribute applies where is the reader's table (schema_rules.json), so
the cases are swept from it, and the reader is shown to ignore each one."""

from __future__ import annotations

import unittest

import numpy as np

from ncert_dump import DumpFormatError, DumpWriter, Segment, rules

from .support import (HAVE_NCERT, TempDirCase, af4_segment, base_projection, ncert_json,
                      write_raw, zero_point_segment)
from .test_reader_parity import projection_node

P = "/projections/q"

# A value of each attribute that its own rule accepts: what a caller would plausibly pass.
PLAUSIBLE = {"group_size": 8, "scale_rows": 1, "variant": "affine", "codebook": "nf4",
             "packing": "u32-lsb", "zero_point_packing": "u8", "dequant": "exact",
             "dequant_op": "either"}


def _bases():
    """(context, segment factory) of one valid second segment per format and AF4 variant."""
    def bf16():
        return base_projection()["weights"][1]

    def f32():
        return Segment("f32", 4, 8, values=np.ones((4, 16), np.float32))

    def int8():
        return Segment("int8", 4, 8, values=np.ones((4, 16), np.int8),
                       scales=np.ones((4, 1), np.float32), group_size=16)

    def affine():
        return af4_segment(rows=4, k=16, row_begin=4)

    def codebook():
        seg = af4_segment(rows=4, k=16, row_begin=4)
        seg.variant, seg.codebook, seg.biases = "codebook", "nf4", None
        return seg

    def zero_point():
        return zero_point_segment(rows=4, k=16, row_begin=4)

    return [({"format": "bf16"}, bf16), ({"format": "f32"}, f32), ({"format": "int8"}, int8),
            ({"format": "af4", "variant": "affine"}, affine),
            ({"format": "af4", "variant": "codebook", "codebook": "nf4"}, codebook),
            ({"format": "af4", "variant": "zero-point"}, zero_point)]


def _cases():
    """(label, context, factory, attribute, value, the condition it fails) for every segment
    attribute of the table that does not apply to a base."""
    out = []
    for context, factory in _bases():
        for rule in rules.rules_of("segment", "attribute"):
            name = rule["name"]
            if name not in PLAUSIBLE or rules.applies(rule, context):
                continue
            cond = next(c for c, values in rule["if"].items() if context.get(c) not in values)
            label = f"{name} on {context.get('variant') or context['format']}"
            out.append((label, context, factory, name, PLAUSIBLE[name], cond))
    return out


class AttributesThatDoNotApply(TempDirCase):
    def kwargs(self, seg):
        kw = base_projection()
        kw["weights"] = [kw["weights"][0], seg]
        return kw

    def test_the_sweep_covers_the_reported_cases(self):
        labels = {c[0] for c in _cases()}
        for label in ("dequant_op on int8", "variant on int8", "codebook on int8",
                      "group_size on bf16", "dequant on bf16", "scale_rows on bf16",
                      "scale_rows on affine", "codebook on affine",
                      "zero_point_packing on affine"):
            self.assertIn(label, labels)

    def test_each_is_refused_naming_segment_attribute_and_format(self):
        for label, context, factory, name, value, cond in _cases():
            with self.subTest(label):
                seg = factory()
                setattr(seg, name, value)
                w = DumpWriter(self.tmp(), engine="t", build="b", overwrite=True)
                self.addCleanup(w.abort)
                with self.assertRaises(DumpFormatError) as cm:
                    w.add_projection("q", **self.kwargs(seg))
                e = cm.exception
                seg_name = f"s1_{context['format']}"
                self.assertEqual(e.name, "invalid-argument")
                self.assertEqual(e.path, f"{P}/weight/{seg_name}")
                rendered = f'"{value}"' if isinstance(value, str) else str(value)
                self.assertIn(f'attribute "{name}" = {rendered} does not apply to {cond} '
                              f'{context[cond]}', e.message)
                self.assertIn("it would be ignored", e.message)
                w.abort()

    def test_a_custom_codebook_off_the_codebook_variant_is_not_dropped(self):
        seg = af4_segment(rows=4, k=16, row_begin=4)
        seg.codebook = np.linspace(-1, 1, 16).astype(np.float32)
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            with self.assertRaises(DumpFormatError) as cm:
                w.add_projection("q", **self.kwargs(seg))
        self.assertIn('attribute "codebook" = "custom" does not apply to variant affine',
                      cm.exception.message)

    def test_the_attributes_that_apply_are_written(self):
        seg = Segment("int8", 4, 8, values=np.ones((4, 16), np.int8),
                      scales=np.ones((2, 1), np.float32), group_size=16, scale_rows=2,
                      dequant="f32")
        with DumpWriter(self.tmp(), engine="t", build="b") as w:
            w.add_projection("q", **self.kwargs(seg))
            w.add_projection("z", **self.kwargs(zero_point_segment(
                rows=4, k=16, row_begin=4, zero_point_packing="u8-lsb", dequant="f32",
                dequant_op="fused")))


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class TheReaderIgnoresThem(TempDirCase):
    def test_each_loads_without_a_finding(self):
        # What makes them writer rules: written without validation, each loads in
        # `ncert inspect` with no error and changes nothing it reports.
        for label, context, factory, name, value, cond in _cases():
            with self.subTest(label):
                seg = factory()
                setattr(seg, name, value)
                kw = base_projection()
                kw["weights"] = [kw["weights"][0], seg]
                write_raw(self.tmp(), {P: projection_node(P, kw)})
                code, report = ncert_json("inspect", self.tmp())
                errors = [f for f in report.get("findings", []) if f["severity"] == "error"]
                self.assertEqual((code, errors), (0, []))


if __name__ == "__main__":
    unittest.main()
