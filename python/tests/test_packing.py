"""Gather and scatter of the packed path on numpy arrays (torch: test_torch_helpers.py)."""

from __future__ import annotations

import unittest

import numpy as np

from ncert_dump import DumpFormatError, canonical_selector, pack_rows, scatter_rows


class CanonicalSelector(unittest.TestCase):
    def test_requests_fill_slots_in_order(self):
        self.assertEqual(canonical_selector(4, [2, 0, 1], 5).tolist(), [0, 1, 8, -1, -1])
        self.assertEqual(canonical_selector(4, [3, 3], 4).tolist(), [0, 1, 2, 4])  # truncated
        self.assertEqual(canonical_selector(4, [0, 0], 2).dtype, np.int32)


class PackRows(unittest.TestCase):
    def setUp(self):
        self.x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)

    def test_gather(self):
        compact, sel = pack_rows(self.x, 2, 4, 2, 4, [2, 1])
        self.assertEqual(sel.tolist(), [0, 1, 4, -1])
        self.assertTrue(np.array_equal(compact[:3], self.x[[0, 1, 4]]))
        self.assertTrue(np.all(compact[3] == 0))
        self.assertEqual(compact.dtype, self.x.dtype)

    def test_uint16_patterns_are_gathered_unchanged(self):
        x = np.arange(16, dtype=np.uint16).reshape(4, 4) | np.uint16(0x7F80)
        compact, _ = pack_rows(x, 2, 2, 1, 2, [1, 1])
        self.assertTrue(np.array_equal(compact, x[[0, 2]]))

    def test_geometry_refusals(self):
        cases = [((2, 4, 1, 4, [2, 1]), "guard-cap-exceeded", "request 0 gathers 2 rows"),
                 ((2, 4, 2, 2, [2, 1]), "guard-too-few-slots",
                  "commit counts sum to 3 rows but only 2 physical slots"),
                 ((2, 4, 2, 4, [2]), "guard-plan-shape", "commit_counts has 1 entries for R = 2"),
                 ((3, 4, 2, 4, [1, 1, 1]), "guard-extent-too-small", "x has 8 rows"),
                 ((2, 4, 2, 4, [-1, 1]), "guard-commit-mismatch", "negative commit count -1")]
        for args, name, fragment in cases:
            with self.subTest(name=name):
                with self.assertRaises(DumpFormatError) as cm:
                    pack_rows(self.x, *args)
                self.assertEqual(cm.exception.name, name)
                self.assertIn(fragment, cm.exception.message)


class ScatterRows(unittest.TestCase):
    def test_only_selected_rows_and_valid_columns_change(self):
        before = np.full((6, 5), 7, np.uint16)
        compact = np.array([[1, 1, 1], [2, 2, 2], [9, 9, 9]], np.uint16)
        out = scatter_rows(compact, np.array([4, 0, -1], np.int32), before.copy())
        expect = before.copy()
        expect[4, :3] = 1
        expect[0, :3] = 2
        self.assertTrue(np.array_equal(out, expect))


if __name__ == "__main__":
    unittest.main()
