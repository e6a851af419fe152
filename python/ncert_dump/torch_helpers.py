"""Helpers for engines written with PyTorch: capture nn.Linear calls, record greedy decoding.

torch is imported lazily, inside the functions that need it, so ``import ncert_dump`` works on
machines without torch. bf16 tensors leave torch as uint16 bit patterns (numpy has no
bfloat16), which is exactly the form the writer stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Literal, Optional

import numpy as np

from .codecs import f32_from_bf16, f32_from_f16
from .packing import canonical_selector, pack_rows, scatter_rows
from .segments import Segment

__all__ = [
    "tensor_to_numpy",
    "dtype_name",
    "LinearCall",
    "LinearCapture",
    "GreedyRecorder",
    "greedy_token",
    "canonical_selector",
    "pack_rows",
    "scatter_rows",
]


def _torch():
    import torch  # lazily: the package must import without torch

    return torch


def dtype_name(t) -> str:
    """The ncert name of a torch tensor's element type: f32, f16 or bf16."""
    torch = _torch()
    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
    if t.dtype not in names:
        raise TypeError(f"{t.dtype} is not one of float32, float16, bfloat16")
    return names[t.dtype]


def tensor_to_numpy(t) -> np.ndarray:
    """A host copy of `t` as numpy; bfloat16 becomes its uint16 bit patterns, unchanged."""
    torch = _torch()
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.numpy().copy()


@dataclass
class LinearCall:
    """One forward call of an nn.Linear, as the engine's buffers held it.

    ``x`` ``[M, K]`` (leading dimensions flattened into rows), ``weight`` ``[N, K]``, ``bias``
    ``[N]`` or None, ``y`` ``[M, N]``; bf16 arrays are uint16 patterns. The ``*_dtype`` fields
    name each array's type (f32, f16, bf16).
    """

    x: np.ndarray
    weight: np.ndarray
    bias: Optional[np.ndarray]
    y: np.ndarray
    x_dtype: str
    weight_dtype: str
    output_dtype: str

    def projection_kwargs(self) -> dict:
        """Keyword arguments for DumpWriter.add_projection describing this call unpacked.

        Every row is its own slot (selector 0..M-1) and the output is ``y_unpacked``; add
        ``accumulator=`` (and any packed-path members) before writing.
        """
        n = int(self.weight.shape[0])
        return {
            "x": self.x,
            "x_dtype": self.x_dtype,
            "weights": [Segment(format=self.weight_dtype, row_begin=0, row_end=n,
                                values=self.weight)],
            "epilogue": "bias" if self.bias is not None else "none",
            "bias": self.bias,
            "bias_dtype": self.weight_dtype if self.bias is not None else None,
            "output_dtype": self.output_dtype,
            "y_unpacked": self.y,
            "selector": np.arange(self.x.shape[0], dtype=np.int32),
        }


class LinearCapture:
    """Records every forward call of one ``nn.Linear`` while the context is open.

    ``with LinearCapture(model.lm_head) as cap: model(...)`` then ``cap.calls`` lists one
    LinearCall per call. Weights are copied once and shared between calls until the parameter
    changes (torch bumps its version counter on every in-place update).
    """

    def __init__(self, module):
        self.module = module
        self.calls: List[LinearCall] = []
        self._handle = None
        self._weight_key = None
        self._weight = None

    def __enter__(self) -> "LinearCapture":
        self._handle = self.module.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> Literal[False]:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        return False

    def merged(self) -> LinearCall:
        """All calls as one: rows stacked in call order (an lm_head over a decode loop gives
        one output row per emitted token, the form a logits run's lm_head takes).

        Raises ValueError when the weights changed between calls.
        """
        if not self.calls:
            raise ValueError("no call was captured")
        first = self.calls[0]
        if any(c.weight is not first.weight for c in self.calls):
            raise ValueError("the weights changed between the captured calls")
        return LinearCall(x=np.concatenate([c.x for c in self.calls]), weight=first.weight,
                          bias=first.bias, y=np.concatenate([c.y for c in self.calls]),
                          x_dtype=first.x_dtype, weight_dtype=first.weight_dtype,
                          output_dtype=first.output_dtype)

    def _weight_snapshot(self):
        w = self.module.weight
        key = (w.data_ptr(), w._version, tuple(w.shape), w.dtype)
        if key != self._weight_key:
            self._weight_key = key
            self._weight = tensor_to_numpy(w)
        return self._weight

    def _hook(self, module, inputs, output) -> None:
        x = inputs[0]
        k = int(module.weight.shape[1])
        n = int(module.weight.shape[0])
        bias = module.bias
        self.calls.append(LinearCall(
            x=tensor_to_numpy(x.reshape(-1, k)),
            weight=self._weight_snapshot(),
            bias=tensor_to_numpy(bias) if bias is not None else None,
            y=tensor_to_numpy(output.reshape(-1, n)),
            x_dtype=dtype_name(x),
            weight_dtype=dtype_name(module.weight),
            output_dtype=dtype_name(output),
        ))


def _row_f32(row) -> np.ndarray:
    """One logits row as float32 values: 16-bit types widen exactly, float64 is kept."""
    if type(row).__module__.startswith("torch"):
        torch = _torch()
        is_f16 = row.dtype == torch.float16
        a = tensor_to_numpy(row).reshape(-1)
        if a.dtype == np.uint16:
            return f32_from_bf16(a)
        return f32_from_f16(a.view(np.uint16)) if is_f16 else a
    a = np.asarray(row).reshape(-1)
    if a.dtype == np.uint16:  # bf16 patterns
        return f32_from_bf16(a)
    if a.dtype == np.float16:
        return f32_from_f16(a)
    return a


def greedy_token(row) -> int:
    """argmax with the lowest id among equal maxima; NaN never wins (as ncert's scans)."""
    r = _row_f32(row).astype(np.float64)
    nan = np.isnan(r)
    if nan.all():
        raise ValueError("every logit of the row is NaN")
    masked = np.where(nan, -np.inf, r)
    best = int(np.argmax(masked))
    if nan[best]:  # the maximum is -inf and a NaN came first: take the first real -inf
        best = int(np.flatnonzero(~nan)[0])
    return best


class GreedyRecorder:
    """Records the raw logits row and the emitted token of every step of a decode loop.

    ``step(row)`` picks the greedy token (lowest id among ties), records both and returns the
    token; ``record(row, token)`` records a token the engine chose itself (so ncert can judge
    it); ``run(next_logits, steps)`` drives a whole loop. ``write(writer, name)`` stores the
    run as ``/logits/<name>``. Rows are kept as f32 (bf16 / f16 logits widen exactly).
    """

    def __init__(self, prompt_tokens=None, prompt: Optional[str] = None,
                 start_position: Optional[int] = None):
        self.prompt_tokens = None if prompt_tokens is None else np.asarray(prompt_tokens)
        self.prompt = prompt
        if start_position is None and self.prompt_tokens is not None:
            start_position = int(self.prompt_tokens.size)
        self.start_position = start_position
        self._rows: List[np.ndarray] = []
        self._tokens: List[int] = []

    def record(self, row, token: int) -> None:
        r = _row_f32(row)
        if self._rows and r.shape != self._rows[0].shape:
            raise ValueError(f"row of {r.size} logits after rows of {self._rows[0].size}")
        self._rows.append(r)
        self._tokens.append(int(token))

    def step(self, row) -> int:
        token = greedy_token(row)
        self.record(row, token)
        return token

    def run(self, next_logits: Callable[[Optional[int]], object], steps: int,
            eos_token: Optional[int] = None) -> List[int]:
        """Calls ``next_logits(previous_token)`` (None first) up to `steps` times."""
        token = None
        out = []
        for _ in range(steps):
            token = self.step(next_logits(token))
            out.append(token)
            if eos_token is not None and token == eos_token:
                break
        return out

    @property
    def tokens(self) -> np.ndarray:
        return np.asarray(self._tokens, dtype=np.int32)

    @property
    def logits(self) -> np.ndarray:
        if not self._rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(self._rows)

    def write(self, writer, name: str, chunk_rows=None, compression=None) -> str:
        """Writes the recorded run through `writer` (a DumpWriter); returns its path."""
        positions = None
        if self.start_position is not None:
            positions = self.start_position + np.arange(len(self._tokens), dtype=np.int64)
        return writer.add_logits_run(name, tokens=self.tokens, logits=self.logits,
                                     positions=positions, prompt_tokens=self.prompt_tokens,
                                     prompt=self.prompt, tie_break="lowest", chunk_rows=chunk_rows,
                                     compression=compression)
