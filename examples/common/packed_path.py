"""The packed path the ONNX Runtime examples share (docs/dump-format.md §3.2): 8 requests of 4
rows (M = 32), each gathering a prefix of its block (at most cap = 4 rows: ncert's packing
helper takes R <= 8 and cap <= min(4, B), guard 315), into 24 slots in a scheduler's order with
one left empty; and the gather and scatter an engine's packed call does around its kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# M = requests x block_rows
kRequests, kBlockRows, kCap = 8, 4, 4
kCommit = (3, 4, 2, 4, 1, 3, 4, 2)  # rows gathered per request (a prefix of its block), <= cap


@dataclass
class Packing:
    """The packed path's geometry: slot p holds row selector[p]."""

    selector: np.ndarray  # int32 [P], -1 for an empty slot
    commit_counts: np.ndarray  # int32 [R]


def packing() -> Packing:
    # Requests in a scheduler's order, not the rows', with one empty slot after the fourth:
    # P = 23 + 1 slots.
    slots = []
    for r in (5, 2, 0, 7):
        slots += [r * kBlockRows + i for i in range(kCommit[r])]
    slots.append(-1)
    for r in (3, 6, 1, 4):
        slots += [r * kBlockRows + i for i in range(kCommit[r])]
    return Packing(np.array(slots, dtype=np.int32), np.array(kCommit, dtype=np.int32))


def gather(x: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """S·X: the compact input, slot p = row sel[p]; an empty slot holds zeros."""
    xc = np.zeros((sel.size, x.shape[1]), dtype=x.dtype)
    used = sel >= 0
    xc[used] = x[sel[used]]
    return xc


def scatter(y_before: np.ndarray, y_compact: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The packed output buffer after the call: y_before with each used slot's row written."""
    y = y_before.copy()
    used = sel >= 0
    y[sel[used]] = y_compact[used]
    return y
