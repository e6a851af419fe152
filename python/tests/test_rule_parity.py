"""The writer refuses what the reader refuses, rule by rule of the reader's own table.

Every member rule in schema_rules.json (generated from certify/io/schema_rules.cc) plants its
violations in a valid projection, weight segment, logits run or state tensor: the member
removed, an attribute of the wrong type, an integer below its minimum, a value outside its
closed set, a dataset of a refused element type or of the wrong rank. Each planted object is
validated by the writer's checks (schema.py, guards.py) and written *without* validation for
`ncert inspect` (or `ncert check` for a packing guard): both must refuse with the same error
name, path and sentence, or both accept. The cases come from the data, so a rule added to the
C++ table is swept here without a new test.
"""

from __future__ import annotations

from typing import Any

import copy
import unittest

import numpy as np

from ncert_dump import DumpFormatError, Segment, limits, rules
from ncert_dump.quant import quantize_activations
from ncert_dump.build import build_logits, build_tensor
from ncert_dump.guards import check_weights_and_strides
from ncert_dump.nodes import STORAGE_DTYPES, Group, Stored
from ncert_dump.schema import check_logits, check_projection, check_tensor

from .refusal_cases import _codebook_seg, _with_af4, _zero_point_seg
from .support import HAVE_NCERT, TempDirCase, base_projection, ncert_json, write_raw
from .test_reader_parity import projection_node

P = "/projections/q"
RUN = "/logits/r"
TENSOR = "/tensors/kv"

# Refusals of the writer that the reader leaves to `check` or does not make (python/README.md,
# "Writer rules"): the only refusals allowed without a matching reader finding.
WRITER_ONLY = {
    ("missing-member", 'missing dataset "y_unpacked" (at least one of y_unpacked, y_packed, '
                       "y_compact is required)"),
    # The reader notes and ignores x_quant's other members without x_quant.
    ("invalid-argument", "x_quant_group without x_quant; it would be ignored"),
}


def _projection_bases():
    """(context, kwargs, segment) of valid projections, every optional member present, that
    between them satisfy every condition of the table."""
    kw = base_projection()
    y = kw["y_unpacked"]
    kw.update(y_packed=y.copy(), y_before=y.copy(), y_compact=y[:3].copy())
    epilogue = dict(kw, epilogue="bias+residual", bias=np.zeros(8, np.float32),
                    residual=np.zeros((4, 8), np.float32))
    affine = dict(kw, **_with_af4(kw))
    nf4 = dict(kw, **_codebook_seg(kw))
    custom = dict(kw, **_codebook_seg(kw, codebook=np.linspace(-1, 1, 16).astype(np.float32)))
    zero_point = dict(kw, **_zero_point_seg(kw, zero_point_packing="u8", dequant="f32",
                                            dequant_op="fused"))
    q, s, _ = quantize_activations(kw["x"], 16, "int8", group=8, x_dtype="bf16")
    quantized = dict(kw, x_quant="int8", x_quant_group=8, x_quant_rounding="rne", x_quantized=q,
                     x_scales=s, x_zero_points=np.zeros((4, 2), np.int8))
    scaled = dict(kw, weights=[kw["weights"][0], Segment(
        "int8", 4, 8, values=np.ones((4, 16), np.int8), scales=np.ones((2, 2), np.float32),
        group_size=8, scale_rows=2, dequant="f32")])
    return [
        ({"epilogue": "none", "format": "bf16"}, kw, "s1_bf16"),
        ({"epilogue": "bias+residual", "format": "bf16"}, epilogue, "s1_bf16"),
        ({"epilogue": "none", "format": "af4", "variant": "affine"}, affine, "s1_af4"),
        ({"epilogue": "none", "format": "af4", "variant": "codebook", "codebook": "nf4"}, nf4,
         "s1_af4"),
        ({"epilogue": "none", "format": "af4", "variant": "codebook", "codebook": "custom"},
         custom, "s1_af4"),
        ({"epilogue": "none", "format": "af4", "variant": "zero-point"}, zero_point, "s1_af4"),
        ({"epilogue": "none", "format": "bf16", "x_quant": "int8"}, quantized, "s1_bf16"),
        ({"epilogue": "none", "format": "int8"}, scaled, "s1_int8"),
    ]


def _wrong_type(value):
    return 5 if isinstance(value, str) or value is None else str(value)


def _attribute_plants(rule: dict, present):
    """(label, new value or None to remove) for one attribute rule."""
    plants: list[tuple[str, Any]] = []
    if present is not None:
        plants.append(("absent", None))
    if rule["type"] == "int":
        plants.append(("not an integer", "1"))
        if rule["min_value"] is not None:
            plants.append(("below the minimum", rule["min_value"] - 1))
        if rule["min_value"] is not None and rule["min_value"] >= 0:  # an extent or a count
            plants.append(("above the largest extent", limits.MAX_SHAPE_VALUE + 1))
    else:
        plants.append(("not a string", 5))
        if rule["values"]:
            plants.append(("outside the value set", "not-" + rule["values"]["names"][0]))
    return plants


def _dataset_plants(rule: dict, node: Any, allowed):
    """(label, new node or None to remove) for one dataset rule."""
    plants: list[tuple[str, Any]] = [("absent", None)]
    refused = next(t for t in ("i64", "u8", "f16") if t not in allowed)
    plants.append(("refused dtype " + refused,
                   Stored(refused, node.array.astype(STORAGE_DTYPES[refused]))))
    if rule["shape"] == "dims":
        plants.append(("one rank more", Stored(node.dtype, node.array[..., None])))
    return plants


@unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
class RuleParity(TempDirCase):
    def reader_errors(self, members: dict, command="inspect"):
        path = self.tmp("raw.h5")
        write_raw(path, members)
        code, report = ncert_json(command, path)
        if command == "check":
            return code, [c["reason"] for c in report["checks"] if c["kind"] == "geometry"]
        return code, [(f["code"], f["path"], f["message"]) for f in report.get("findings", [])
                      if f["severity"] == "error"]

    def assert_same_verdict(self, label, members: dict, validate, must_refuse: bool):
        """The writer's validation and the reader's findings on the same objects agree."""
        with self.subTest(label):
            try:
                validate()
                refusal = None
            except DumpFormatError as e:
                refusal = e
            if must_refuse:
                self.assertIsNotNone(refusal, f"{label}: the writer accepted a planted violation")
            if refusal is not None and refusal.name.startswith("guard-"):
                code, reasons = self.reader_errors(members, "check")
                self.assertEqual(reasons, [f"{refusal.name} ({refusal.code}): {refusal.message}"])
                return
            code, errors = self.reader_errors(members)
            if refusal is None:
                self.assertEqual(errors, [],
                                 f"{label}: the writer accepted what the reader refuses")
                self.assertEqual(code, 0)
            elif (refusal.name, refusal.message) in WRITER_ONLY:
                self.assertEqual(errors, [], f"{label}: a writer rule the reader also makes")
            else:
                self.assertIn((refusal.name, refusal.path, refusal.message), errors, label)
                self.assertEqual(code, 3)

    def sweep_projection(self, node: Group, obj: Group, obj_path: str, rule: dict, context):
        """Plants each violation of `rule` in `obj` (the projection or one of its segments)."""
        def validate(n):
            return lambda: check_weights_and_strides(check_projection(P, n))

        name = rule["name"]
        if rule["kind"] == "attribute":
            for what, value in _attribute_plants(rule, obj.attrs.get(name)):
                planted = copy.deepcopy(node)
                target = planted if obj is node else _find(planted, obj_path)
                if value is None:
                    del target.attrs[name]
                else:
                    target.attrs[name] = value
                must = value is not None or (rule["required"] and rules.applies(rule, context))
                self.assert_same_verdict(f"{obj_path} {name}: {what}", {P: planted},
                                         validate(planted), must)
        elif rule["kind"] == "dataset":
            member = obj.members.get(name)
            self.assertIsNotNone(member, f"the base of {obj_path} lacks {name}")
            for what, value in _dataset_plants(rule, member, rules.allowed_dtypes(
                    rule, {"output_dtype": node.attrs["output_dtype"],
                           "x_quant": node.attrs.get("x_quant"),
                           "format": obj.attrs.get("format"), "packing": obj.attrs.get("packing"),
                           "zero_point_packing": obj.attrs.get("zero_point_packing", "u8"),
                           "scales": obj.members["scales"].dtype if "scales" in obj.members
                           else None})):
                planted = copy.deepcopy(node)
                target = planted if obj is node else _find(planted, obj_path)
                if value is None:
                    del target.members[name]
                else:
                    target.members[name] = value
                self.assert_same_verdict(f"{obj_path}/{name}: {what}", {P: planted},
                                         validate(planted), value is not None or rule["required"])
        else:
            planted = copy.deepcopy(node)
            del planted.members[name]
            self.assert_same_verdict(f"{obj_path}/{name}: absent", {P: planted},
                                     validate(planted), rule["required"])

    def test_projection_and_segment_rules(self):
        swept = set()
        for context, kwargs, segment in _projection_bases():
            node = projection_node(P, kwargs)
            check_weights_and_strides(check_projection(P, node))  # the base is valid
            seg_path = f"{P}/weight/{segment}"
            for rule in rules.rules_of("projection") + rules.rules_of("segment"):
                key = (rule["container"], rule["kind"], rule["name"])
                if key in swept or not rules.applies(rule, context):
                    continue
                swept.add(key)
                if rule["container"] == "projection":
                    self.sweep_projection(node, node, P, rule, context)
                else:
                    self.sweep_projection(node, _find(node, seg_path), seg_path, rule, context)
        every = {(r["container"], r["kind"], r["name"])
                 for r in rules.rules_of("projection") + rules.rules_of("segment")}
        self.assertEqual(swept, every, "a rule whose condition no base satisfies")

    def test_logits_run_rules(self):
        rng = np.random.default_rng(1)
        logits = rng.standard_normal((3, 5)).astype(np.float32)
        node = build_logits(RUN, tokens=logits.argmax(axis=1).astype(np.int32), logits=logits,
                            positions=np.arange(3), prompt_tokens=np.array([1, 2], np.int32),
                            prompt="hi", tie_break="lowest", chunk_rows=None, compression=None,
                            vocab=None)
        check_logits(RUN, node)
        for rule in rules.rules_of("logits_run"):
            name = rule["name"]
            if rule["kind"] == "attribute":
                plants = [(w, v, v is not None or rule["required"])
                          for w, v in _attribute_plants(rule, node.attrs.get(name))]
                for what, value, must in plants:
                    planted = copy.deepcopy(node)
                    if value is None:
                        del planted.attrs[name]
                    else:
                        planted.attrs[name] = value
                    self.assert_same_verdict(f"{RUN} {name}: {what}", {RUN: planted},
                                             lambda: check_logits(RUN, planted), must)
            else:
                member = node.members[name]
                for what, value in _dataset_plants(rule, member, rules.allowed_dtypes(rule)):
                    planted = copy.deepcopy(node)
                    if value is None:
                        del planted.members[name]
                    else:
                        planted.members[name] = value
                    self.assert_same_verdict(f"{RUN}/{name}: {what}", {RUN: planted},
                                             lambda: check_logits(RUN, planted),
                                             value is not None or rule["required"])

    def test_tensor_rules(self):
        tensor = rules.dataset("tensor", "")
        compare = rules.attribute("tensor", "compare")
        for dtype in ("f32", "f16", "bf16", "i32", "i64", "u8", "u32"):
            node = build_tensor(TENSOR, np.zeros((2, 3), STORAGE_DTYPES[dtype]), dtype, None)
            self.assert_same_verdict(f"{TENSOR}: dtype {dtype}", {TENSOR: node},
                                     lambda: check_tensor(TENSOR, node),
                                     dtype not in rules.allowed_dtypes(tensor))
        for what, value in _attribute_plants(compare, None):
            node = build_tensor(TENSOR, np.zeros(3, np.float32), "f32", None)
            node.attrs[compare["name"]] = value
            self.assert_same_verdict(f"{TENSOR} compare: {what}", {TENSOR: node},
                                     lambda: check_tensor(TENSOR, node), True)


def _find(node: Group, path: str):
    """The member of the projection `node` at the absolute `path` below P."""
    for part in path[len(P) + 1:].split("/"):
        node = node.members[part]
    return node


class RulesData(unittest.TestCase):
    """The loaded table is the generated file, and the writer's checks consult it."""

    def test_the_file_says_it_is_generated(self):
        self.assertIn("ncert-docgen", rules.DATA["generated_by"])
        self.assertIn("certify/io/schema_rules.cc", rules.DATA["generated_by"])

    def test_every_container_has_rules(self):
        for container in ("root", "projection", "segment", "logits_run", "tensor"):
            self.assertTrue(rules.rules_of(container), container)

    def test_the_writer_follows_an_edited_rule(self):
        # Raise k's minimum in the loaded table: the writer now refuses k = 16 with the
        # reader's sentence, so the check reads the table rather than a copy of it.
        k = rules.attribute("projection", "k")
        saved = k["min_value"]
        self.addCleanup(k.__setitem__, "min_value", saved)
        node = projection_node(P, base_projection())
        check_projection(P, node)
        k["min_value"] = 17
        with self.assertRaises(DumpFormatError) as cm:
            check_projection(P, node)
        self.assertEqual((cm.exception.name, cm.exception.message),
                         ("attribute-invalid", 'attribute "k" = 16 is below 17'))

    def test_conditions_and_context_types(self):
        bias = rules.dataset("projection", "bias")
        self.assertTrue(rules.applies(bias, {"epilogue": "bias+residual"}))
        self.assertFalse(rules.applies(bias, {"epilogue": "residual"}))
        table = rules.dataset("segment", "codebook")
        self.assertFalse(rules.applies(table, {"format": "af4", "variant": "codebook"}))
        self.assertEqual(rules.allowed_dtypes(rules.dataset("segment", "codes"),
                                              {"packing": "u8-msb"}), ["u8"])
        self.assertEqual(rules.expected_shape(rules.dataset("segment", "codes"),
                                              {"rows": 4, "K": 16}), (4, -1))
        self.assertEqual(rules.codes_per_element("u32-lsb"), 8)


if __name__ == "__main__":
    unittest.main()
