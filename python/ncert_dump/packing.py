"""The packed path's gather and scatter, as the project's packing helper defines them.

R request slots of B rows each (M = R*B original rows); request r commits its first c_r <= cap
rows; those rows are gathered, request by request, into P physical slots (the canonical
selector of packing/guards.cc), the kernel runs on the compact rows, and the results are
scattered back. Works on numpy arrays and on torch tensors alike (indexing only), so an engine
test can build exactly the selector and compact input its kernel should see.
"""

from __future__ import annotations

import numpy as np

from .errors import DumpFormatError

__all__ = ["canonical_selector", "pack_rows", "scatter_rows"]


def canonical_selector(block_rows: int, commit_counts, slots: int) -> np.ndarray:
    """int32 [P]: request r's first commit_counts[r] rows fill the next slots, -1 after.

    Rows that do not fit in `slots` are dropped, as in the C++ canonical_selector.
    """
    counts = np.asarray(commit_counts, dtype=np.int64).reshape(-1)
    if np.any(counts < 0):
        raise DumpFormatError("guard-commit-mismatch", "commit_counts",
                              f"negative commit count {int(counts[counts < 0][0])}")
    rows = np.concatenate([r * block_rows + np.arange(c, dtype=np.int64)
                           for r, c in enumerate(counts)] or [np.zeros(0, np.int64)])
    sel = np.full(int(slots), -1, dtype=np.int32)
    used = min(len(rows), int(slots))
    sel[:used] = rows[:used]
    return sel


def _gather_index(selector):
    sel = np.asarray(selector, dtype=np.int64)
    used = np.flatnonzero(sel >= 0)
    return sel, used, sel[used]


def pack_rows(x, requests: int, block_rows: int, cap: int, slots: int, commit_counts):
    """Gathers the committed rows of `x` ``[R*B, ...]`` into ``[P, ...]`` compact rows.

    Returns ``(compact, selector)``: empty slots of `compact` are zero, `selector` is int32
    ``[P]`` in canonical order. Raises DumpFormatError with the packing guard's name when the
    geometry itself is impossible (x rows != R*B, a count above cap, or more rows than slots).
    """
    counts = np.asarray(commit_counts, dtype=np.int64).reshape(-1)
    if counts.shape != (requests,):
        raise DumpFormatError("guard-plan-shape", "commit_counts",
                              f"commit_counts has {counts.size} entries for R = {requests}")
    if int(x.shape[0]) != requests * block_rows:
        raise DumpFormatError("guard-extent-too-small", "x",
                              f"x has {int(x.shape[0])} rows; R x B = {requests} x "
                              f"{block_rows} = {requests * block_rows}")
    for r, c in enumerate(counts):
        if c < 0:
            raise DumpFormatError("guard-commit-mismatch", "commit_counts",
                                  f"negative commit count {int(c)}")
        if c > cap:
            raise DumpFormatError("guard-cap-exceeded", "commit_counts",
                                  f"request {r} gathers {int(c)} rows (commit count {int(c)}) "
                                  f"but cap = {cap}")
    if counts.sum() > slots:
        raise DumpFormatError("guard-too-few-slots", "commit_counts",
                              f"commit counts sum to {int(counts.sum())} rows but only "
                              f"{slots} physical slots")
    selector = canonical_selector(block_rows, counts, slots)
    _, used, rows = _gather_index(selector)
    if hasattr(x, "new_zeros"):  # a torch tensor: stay on its device and dtype
        import torch

        compact = x.new_zeros((slots,) + tuple(x.shape[1:]))
        compact[torch.as_tensor(used, device=x.device)] = x[torch.as_tensor(rows, device=x.device)]
    else:
        compact = np.zeros((slots,) + tuple(x.shape[1:]), dtype=x.dtype)
        compact[used] = x[rows]
    return compact, selector


def scatter_rows(compact_y, selector, out):
    """Writes slot p of `compact_y` into row selector[p] of `out`, in place; returns `out`.

    Only the first ``compact_y.shape[1]`` columns of each selected row are written, so padding
    columns beyond them and unselected rows keep their bits (what `y_before` certifies).
    """
    _, used, rows = _gather_index(selector)
    width = int(compact_y.shape[1])
    if hasattr(out, "new_zeros"):
        import torch

        out[torch.as_tensor(rows, device=out.device), :width] = \
            compact_y[torch.as_tensor(used, device=compact_y.device)]
    else:
        out[rows, :width] = compact_y[used]
    return out
