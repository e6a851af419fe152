"""The torch helpers on real torch modules: captured Linear calls, greedy decoding, packed
gather/scatter on tensors, and dumps made from them that ncert certifies."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import unittest

import h5py
import numpy as np

from ncert_dump import DumpWriter, bf16_from_f32, pack_rows, scatter_rows

from .support import HAVE_NCERT, REPO, TempDirCase, ncert_json

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch

    from ncert_dump.torch_helpers import GreedyRecorder, LinearCapture, greedy_token, tensor_to_numpy


class ImportWithoutTorch(unittest.TestCase):
    def test_package_imports_without_torch(self):
        code = ("import sys; sys.modules['torch'] = None; import ncert_dump, "
                "ncert_dump.torch_helpers; print('ok')")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=REPO, env={"PYTHONPATH": f"{REPO}/python"})
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class TensorConversion(TempDirCase):
    def test_bf16_tensors_become_their_patterns(self):
        v = torch.randn(1000) * 10
        got = tensor_to_numpy(v.to(torch.bfloat16))
        self.assertEqual(got.dtype, np.uint16)
        # torch's own f32 -> bf16 conversion is round-to-nearest-even too.
        self.assertTrue(np.array_equal(got, bf16_from_f32(v.numpy())))

    def test_f32_and_f16_tensors(self):
        self.assertEqual(tensor_to_numpy(torch.ones(2, 3)).dtype, np.float32)
        self.assertEqual(tensor_to_numpy(torch.ones(2, dtype=torch.float16)).dtype, np.float16)

    def test_writer_takes_tensors(self):
        t = torch.randn(2, 3).to(torch.bfloat16)
        with DumpWriter(self.tmp(), engine="torch", build="t") as w:
            w.add_tensor("kv", t, dtype="bf16")
        with h5py.File(self.tmp(), "r") as f:
            self.assertTrue(np.array_equal(f["/tensors/kv"][()], tensor_to_numpy(t)))


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class Capture(TempDirCase):
    def setUp(self):
        super().setUp()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 8)

    def test_records_each_call_with_flattened_rows(self):
        with LinearCapture(self.lin) as cap:
            a = self.lin(torch.randn(2, 3, 16))
            self.lin(torch.randn(5, 16))
        self.lin(torch.randn(1, 16))  # after the context: not recorded
        self.assertEqual(len(cap.calls), 2)
        c = cap.calls[0]
        assert c.bias is not None  # the layer has a bias
        self.assertEqual((c.x.shape, c.y.shape, c.weight.shape, c.bias.shape),
                         ((6, 16), (6, 8), (8, 16), (8,)))
        self.assertTrue(np.array_equal(c.y, a.detach().reshape(6, 8).numpy()))
        self.assertIs(cap.calls[1].weight, c.weight)  # one copy while the weight is unchanged
        self.assertEqual((c.x_dtype, c.weight_dtype, c.output_dtype), ("f32", "f32", "f32"))

    def test_a_changed_weight_is_copied_again(self):
        with LinearCapture(self.lin) as cap:
            self.lin(torch.randn(1, 16))
            with torch.no_grad():
                self.lin.weight.mul_(2)
            self.lin(torch.randn(1, 16))
        self.assertFalse(np.array_equal(cap.calls[0].weight, cap.calls[1].weight))
        with self.assertRaises(ValueError):
            cap.merged()

    def test_bf16_module(self):
        lin = torch.nn.Linear(16, 8, bias=False).to(torch.bfloat16)
        with LinearCapture(lin) as cap:
            lin(torch.randn(4, 16).to(torch.bfloat16))
        c = cap.calls[0]
        self.assertEqual((c.x.dtype, c.x_dtype, c.output_dtype), (np.uint16, "bf16", "bf16"))
        self.assertIsNone(c.bias)
        kw = c.projection_kwargs()
        self.assertEqual(kw["epilogue"], "none")
        self.assertEqual(kw["weights"][0].format, "bf16")

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
    def test_a_captured_f32_linear_certifies(self):
        with LinearCapture(self.lin) as cap:
            self.lin(torch.randn(6, 16))
        with DumpWriter(self.tmp(), engine="torch", build=torch.__version__) as w:
            w.add_projection("lin", accumulator="f32-rn", **cap.calls[0].projection_kwargs())
        code, report = ncert_json("check", self.tmp())
        self.assertEqual(code, 0, [(c["id"], c["reason"]) for c in report["checks"]])


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class PackedPathOnTensors(unittest.TestCase):
    def test_pack_and_scatter_tensors(self):
        x = torch.arange(8 * 4, dtype=torch.float32).reshape(8, 4)
        compact, sel = pack_rows(x, 2, 4, 2, 4, [1, 2])
        self.assertIsInstance(compact, torch.Tensor)
        self.assertEqual(sel.tolist(), [0, 4, 5, -1])
        self.assertTrue(torch.equal(compact[:3], x[[0, 4, 5]]))
        out = torch.full((8, 6), -1.0)
        scatter_rows(compact * 2, sel, out)
        self.assertTrue(torch.equal(out[4, :4], x[4] * 2))
        self.assertTrue(torch.equal(out[1], torch.full((6,), -1.0)))
        self.assertTrue(torch.equal(out[0, 4:], torch.full((2,), -1.0)))


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class Greedy(TempDirCase):
    def test_ties_go_to_the_lowest_id_and_nan_never_wins(self):
        self.assertEqual(greedy_token(np.array([1.0, 3.0, 3.0, 2.0], np.float32)), 1)
        self.assertEqual(greedy_token(np.array([np.nan, 1.0, 1.0], np.float32)), 1)
        self.assertEqual(greedy_token(np.array([np.nan, -np.inf, -np.inf], np.float32)), 1)
        self.assertEqual(greedy_token(torch.tensor([0.5, 2.0, 2.0]).to(torch.bfloat16)), 1)
        with self.assertRaises(ValueError):
            greedy_token(np.array([np.nan, np.nan]))

    def test_bf16_logits_widen_exactly(self):
        rec = GreedyRecorder()
        row = torch.randn(10).to(torch.bfloat16)
        rec.step(row)
        self.assertTrue(np.array_equal(rec.logits[0], row.float().numpy()))
        self.assertEqual(rec.logits.dtype, np.float32)

    @unittest.skipUnless(HAVE_NCERT, "needs the ncert binary (NCERT_BINARY)")
    def test_a_decode_loop_with_its_lm_head_certifies(self):
        torch.manual_seed(3)
        vocab, hidden = 40, 16
        embed = torch.nn.Embedding(vocab, hidden)
        lm_head = torch.nn.Linear(hidden, vocab, bias=False)
        prompt = [3, 1, 4]
        rec = GreedyRecorder(prompt_tokens=prompt, prompt="tiny")

        def next_logits(prev):
            token = prompt[-1] if prev is None else prev
            with torch.no_grad():
                return lm_head(embed(torch.tensor([token])))[0]

        with LinearCapture(lm_head) as cap:
            tokens = rec.run(next_logits, steps=6)
        self.assertEqual(len(tokens), 6)
        head = cap.merged()
        self.assertTrue(np.array_equal(head.y, rec.logits))
        with DumpWriter(self.tmp(), engine="torch", build="greedy") as w:
            w.add_projection("lm_head", accumulator="f32-rn", logits_run="greedy",
                             **head.projection_kwargs())
            rec.write(w, "greedy")
        code, report = ncert_json("check", self.tmp())
        self.assertEqual(code, 0, [(c["id"], c["reason"]) for c in report["checks"]])
        ids = {c["id"] for c in report["checks"]}
        self.assertTrue(any(i.startswith("logits/greedy/") for i in ids), ids)


if __name__ == "__main__":
    unittest.main()
