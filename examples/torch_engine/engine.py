"""A batched greedy decode engine around model.TinyTransformer, exporting ncert dumps.

The engine serves R = 8 requests at once. Each step gives every request a block of B = 8 rows
in the step's activation buffer (M = R*B = 64 rows); the scheduler feeds a request at most
cap = 4 tokens per step (a chunk of its prompt, or the token it emitted last), and rows beyond
a request's count hold whatever the buffers held before. Row-wise work (norms, FFN, residual
adds) runs on all 64 rows; attention reads only the rows fed this step and the KV cache.

The mixer projections (in-projection and out-projection of every layer) run the row-selector
("packed") path: the committed rows are gathered request by request into 32 compact slots,
the nn.Linear runs on the compact buffer, and the results are scattered back into the layer's
persistent output buffer; the model continues from that buffer. For certification the engine
also runs the unpacked path (the same nn.Linear on all 64 rows) and exports both:

    step_<s>.h5   per step: every mixer projection with x, W, selector, commit counts,
                  request geometry, y_unpacked, y_packed, y_compact and y_before
    logits.h5     per request: the greedy logits run and the lm_head rows that produced it

Everything an engine team would change to export from its own engine is in this file:
the capture points (LinearCapture around the module, the packed call's buffers) and the
declarations (accumulator, output type) in `_declared_arithmetic`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

from ncert_dump import DumpWriter, Segment
from ncert_dump.torch_helpers import (GreedyRecorder, LinearCall, LinearCapture, pack_rows,
                                      scatter_rows, tensor_to_numpy)

from model import TinyTransformer


@dataclass(frozen=True)
class Geometry:
    """The packed path's request geometry (the dump's `requests`, `block_rows`, `cap`)."""

    requests: int = 8
    block_rows: int = 8
    cap: int = 4
    slots: int = 32

    @property
    def rows(self) -> int:
        return self.requests * self.block_rows


@dataclass
class Request:
    prompt: List[int]
    max_new: int
    recorder: GreedyRecorder
    emitted: List[int] = field(default_factory=list)
    cached: int = 0  # tokens already in the KV cache

    @property
    def known(self) -> List[int]:
        return self.prompt + self.emitted

    @property
    def finished(self) -> bool:
        return len(self.emitted) >= self.max_new


def make_prompts(vocab: int, requests: int, seed: int) -> List[List[int]]:
    """Prompts of 3 to 13 tokens (3 + 5r mod 11), so prefill takes one to four chunks of at
    most 4 and the requests reach decoding at different steps: commit counts are ragged."""
    gen = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, vocab, (3 + (5 * r) % 11,), generator=gen).tolist()
            for r in range(requests)]


def _declared_arithmetic(dtype: torch.dtype) -> dict:
    """What the export declares about PyTorch's CPU linear kernels, per build.

    Both builds accumulate in f32 with round-to-nearest: f32 nn.Linear calls the BLAS sgemm
    torch was linked with (Debian's python3-torch: the system libblas), and bf16 nn.Linear on
    CPU goes through oneDNN's matmul (brgemm with vdpbf16ps on AVX512-BF16 machines), which
    forms each bf16 product exactly in f32 and accumulates in f32. The bf16 output is that f32
    sum rounded to nearest even. No reduction order (`k_walk`) is declared: torch promises
    none, and it changes with the BLAS library and the CPU, so `walk` is skipped.
    """
    return {"accumulator": "f32-rn",
            "output_dtype": "bf16" if dtype == torch.bfloat16 else "f32"}


class Engine:
    def __init__(self, model: TinyTransformer, geometry: Geometry, out_dir: Path, build: str,
                 model_name: str):
        self.model = model
        self.cfg = model.cfg
        self.geo = geometry
        self.dtype = model.lm_head.weight.dtype
        self.out_dir = out_dir
        self.build = build
        self.model_name = model_name
        m, d = geometry.rows, self.cfg.hidden
        # Persistent step buffers: rows a request does not use this step keep the bits of an
        # earlier step, as an engine's reused workspace does (y_before records them).
        self.tokens = torch.zeros(m, dtype=torch.long)
        self.positions = torch.zeros(m, dtype=torch.long)
        self.mixer_in_out = [torch.zeros(m, 3 * d, dtype=self.dtype) for _ in model.layers]
        self.attn_out = [torch.zeros(m, d, dtype=self.dtype) for _ in model.layers]
        self.mixer_out_out = [torch.zeros(m, d, dtype=self.dtype) for _ in model.layers]
        # KV cache per layer and request: [max_positions, hidden] keys and values.
        shape = (geometry.requests, self.cfg.max_positions, d)
        self.k_cache = [torch.zeros(shape, dtype=self.dtype) for _ in model.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype) for _ in model.layers]
        self.step_projections: List[dict] = []
        self.step_files: List[Path] = []
        self.step_counts: List[List[int]] = []  # commit counts of every step, for the report
        self.logits_file = out_dir / "logits.h5"
        self.engine_seconds = 0.0
        self.export_seconds = 0.0

    # ---- scheduling --------------------------------------------------------------------

    def _schedule(self, requests: List[Request]) -> List[int]:
        """Rows fed per request this step: a prompt chunk of at most cap tokens, or the last
        emitted token; 0 once a request has emitted max_new tokens."""
        counts = []
        for r, req in enumerate(requests):
            c = 0 if req.finished else min(self.geo.cap, len(req.known) - req.cached)
            base = r * self.geo.block_rows
            for j in range(c):
                self.tokens[base + j] = req.known[req.cached + j]
                self.positions[base + j] = req.cached + j
            counts.append(c)
        return counts

    # ---- the packed mixer projection ---------------------------------------------------

    def _packed_linear(self, module: torch.nn.Linear, x: torch.Tensor, out: torch.Tensor,
                       counts: List[int], name: str, layer: int, role: str) -> torch.Tensor:
        """Runs `module` on the committed rows of x through the compact slots and scatters
        into `out` (returned, and what the model continues from); also runs the unpacked
        path on every row, and keeps both for the step's dump."""
        g = self.geo
        # One row per call, on both paths: a GEMM may pick its blocking from the row count
        # (OpenBLAS's sgemm does, netlib's reference BLAS does not, and Debian's torch uses
        # whichever libblas.so.3 points to), which would round the packed path's 32 rows and
        # the unpacked path's 64 differently. Row by row, the kernel's arithmetic for a row
        # depends on that row alone, so the two paths are bit-identical on any BLAS.
        with LinearCapture(module) as unpacked_calls:
            for r in range(x.shape[0]):                             # unpacked: all M rows
                module(x[r:r + 1])
        compact, selector = pack_rows(x, g.requests, g.block_rows, g.cap, g.slots, counts)
        with LinearCapture(module) as packed_calls:                 # packed: P slots
            y_compact = torch.cat([module(compact[s:s + 1]) for s in range(compact.shape[0])])
        y_before = tensor_to_numpy(out)
        scatter_rows(y_compact, selector, out)
        unpacked, packed = unpacked_calls.merged(), packed_calls.merged()
        self.step_projections.append({
            "name": name, "layer": layer, "role": role, "call": unpacked,
            "selector": selector, "commit_counts": np.asarray(counts, dtype=np.int32),
            "y_compact": packed.y, "y_packed": tensor_to_numpy(out), "y_before": y_before,
        })
        return out

    # ---- attention over the KV cache ---------------------------------------------------

    def _attention(self, layer: int, qkv: torch.Tensor, counts: List[int],
                   requests: List[Request]) -> torch.Tensor:
        d, heads, hd = self.cfg.hidden, self.cfg.heads, self.cfg.head_dim
        out = self.attn_out[layer]
        for r, c in enumerate(counts):
            if c == 0:
                continue
            rows = slice(r * self.geo.block_rows, r * self.geo.block_rows + c)
            q, k, v = qkv[rows].split(d, dim=1)
            start = requests[r].cached
            self.k_cache[layer][r, start:start + c] = k
            self.v_cache[layer][r, start:start + c] = v
            keys = self.k_cache[layer][r, :start + c].float().view(-1, heads, hd)
            values = self.v_cache[layer][r, :start + c].float().view(-1, heads, hd)
            scores = torch.einsum("qhd,khd->hqk", q.float().view(c, heads, hd), keys)
            scores = scores / math.sqrt(hd)
            # Row j of the chunk sits at position start + j and sees keys 0..start + j.
            causal = torch.arange(start + c)[None, :] > (start + torch.arange(c))[:, None]
            scores = scores.masked_fill(causal[None], float("-inf"))
            mixed = torch.einsum("hqk,khd->qhd", scores.softmax(-1), values)
            out[rows] = mixed.reshape(c, d).to(self.dtype)
        return out

    # ---- one step and the whole decode -------------------------------------------------

    def _step(self, requests: List[Request], lm_capture_rows: List[List[int]]) -> List[int]:
        counts = self._schedule(requests)
        model = self.model
        h = model.embed(self.tokens) + model.positions(self.positions)
        for i, layer in enumerate(model.layers):
            qkv = self._packed_linear(layer.mixer_in, layer.mixer_norm(h), self.mixer_in_out[i],
                                      counts, f"layer{i}_mixer_in", i, "mixer_in")
            attn = self._attention(i, qkv, counts, requests)
            mixed = self._packed_linear(layer.mixer_out, attn, self.mixer_out_out[i], counts,
                                        f"layer{i}_mixer_out", i, "mixer_out")
            h = h + mixed
            h = h + layer.ffn_down(torch.nn.functional.gelu(layer.ffn_up(layer.ffn_norm(h))))
        # A request emits when this step fed the last token it knows; its last fed row is the
        # one whose logits choose the next token.
        emitting = [r for r, (req, c) in enumerate(zip(requests, counts))
                    if c > 0 and req.cached + c == len(req.known)]
        for r, c in enumerate(counts):
            requests[r].cached += c
        if emitting:
            last_rows = torch.tensor([r * self.geo.block_rows + counts[r] - 1 for r in emitting])
            logits = model.lm_head(model.final_norm(h[last_rows]))
            lm_capture_rows.append(emitting)
            for i, r in enumerate(emitting):
                requests[r].emitted.append(requests[r].recorder.step(logits[i]))
        return counts

    @torch.inference_mode()
    def decode(self, prompts: List[List[int]], max_new: int) -> List[Request]:
        requests = [Request(prompt=p, max_new=max_new,
                            recorder=GreedyRecorder(prompt_tokens=p, prompt=f"request {r}"))
                    for r, p in enumerate(prompts)]
        lm_rows: List[List[int]] = []  # per lm_head call: the request of each row
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with LinearCapture(self.model.lm_head) as lm_capture:
            step = 0
            while not all(req.finished for req in requests):
                t0 = time.perf_counter()
                counts = self._step(requests, lm_rows)
                t1 = time.perf_counter()
                self._write_step(step, counts)
                self.engine_seconds += t1 - t0
                self.export_seconds += time.perf_counter() - t1
                step += 1
        t1 = time.perf_counter()
        self._write_logits(requests, lm_capture.calls, lm_rows)
        self.export_seconds += time.perf_counter() - t1
        return requests

    # ---- export ------------------------------------------------------------------------

    def _writer(self, path: Path) -> DumpWriter:
        return DumpWriter(str(path), engine="ncert torch_engine example", build=self.build,
                          model=self.model_name, device="cpu", overwrite=True)

    def _write_step(self, step: int, counts: List[int]) -> None:
        path = self.out_dir / f"step_{step:02d}.h5"
        declared = _declared_arithmetic(self.dtype)
        g = self.geo
        with self._writer(path) as dw:
            for p in self.step_projections:
                call: LinearCall = p["call"]
                n = call.weight.shape[0]
                dw.add_projection(
                    p["name"], x=call.x, x_dtype=call.x_dtype,
                    weights=[Segment(call.weight_dtype, 0, n, values=call.weight)],
                    selector=p["selector"], commit_counts=p["commit_counts"],
                    requests=g.requests, block_rows=g.block_rows, cap=g.cap,
                    y_unpacked=call.y, y_packed=p["y_packed"], y_compact=p["y_compact"],
                    y_before=p["y_before"], role=p["role"], layer=p["layer"], **declared)
        self.step_projections.clear()
        self.step_files.append(path)
        self.step_counts.append(counts)

    def _write_logits(self, requests: List[Request], calls: List[LinearCall],
                      lm_rows: List[List[int]]) -> None:
        """One logits run per request, and the lm_head rows that produced it: request r's
        rows are picked out of the batched lm_head calls in emission order, so output row t of
        `lm_head_req<r>` is the logits row of token t (what lets ncert bound every logit)."""
        per_request: Dict[int, List[tuple]] = {r: [] for r in range(len(requests))}
        for call, owners in zip(calls, lm_rows):
            for i, r in enumerate(owners):
                per_request[r].append((call.x[i], call.y[i]))
        declared = _declared_arithmetic(self.dtype)
        with self._writer(self.logits_file) as dw:
            for r, req in enumerate(requests):
                first = calls[0]
                head = LinearCall(x=np.stack([x for x, _ in per_request[r]]), weight=first.weight,
                                  bias=None, y=np.stack([y for _, y in per_request[r]]),
                                  x_dtype=first.x_dtype, weight_dtype=first.weight_dtype,
                                  output_dtype=first.output_dtype)
                kwargs = head.projection_kwargs()
                kwargs.update(declared)
                dw.add_projection(f"lm_head_req{r}", logits_run=f"req{r}", **kwargs)
                req.recorder.write(dw, f"req{r}")
