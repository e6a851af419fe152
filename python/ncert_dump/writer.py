"""DumpWriter: writes an ncert dump (dump-format v1) member by member, refusing on write
whatever the C++ reader would refuse on read.

Each add_* call encodes its arrays, checks the resulting objects with the reader's rules
(schema.py, guards.py) and only then writes them, so a refused call leaves nothing behind in
the file (nor does one that fails while writing: what it created is removed). The file is
written under a temporary name beside `path` and moved to `path` by a successful close(): a
dump that exists under its name is complete, and a dump abandoned by an exception never
appears. Until close() the file lacks the root's ncert_schema, so the reader refuses the
temporary file of a writer that was never closed rather than reading it as a dump.
"""

from __future__ import annotations

import os
import uuid
from typing import Literal, Optional

import h5py

from . import h5out, limits, rules, version
from .build import build_logits, build_projection, build_tensor, check_leaf
from .errors import DumpFormatError
from .guards import check_weights_and_strides
from .nodes import Group, Stored
from .weights_hash import weights_xxh3_of_group
from .schema import (ProjectionFacts, check_chunks, check_lm_head, check_logits, check_projection,
                     check_root, check_tensor)

__all__ = ["DumpWriter"]


class DumpWriter:
    """Writes one dump. Use as a context manager (or call close() / abort()).

    Args:
        path: the dump to create.
        engine: engine name (root attribute ``engine``).
        build: build identity: commit, flags (root attribute ``build``).
        model, device: optional root attributes.
        overwrite: replace an existing file at `path` (otherwise "output-exists"); when
            `path` is a symbolic link, the file it names is replaced and the link kept.
    """

    def __init__(self, path, engine: str, build: str, model: Optional[str] = None,
                 device: Optional[str] = None, overwrite: bool = False):
        try:
            # A bytes path is a path too (os.fsdecode keeps undecodable bytes, and h5py encodes
            # them back): mixed with the str names below it would fail at the first join.
            self.path = os.fsdecode(os.fspath(path))
        except TypeError:
            raise DumpFormatError("invalid-argument", str(path),
                                  f"a path is a str, bytes or os.PathLike, not "
                                  f"{type(path).__name__}") from None
        self.overwrite = overwrite
        if os.path.exists(self.path) and not os.path.isfile(self.path):
            # Refused now, whatever overwrite says: replacing a directory or a device would
            # fail only at close(), after the whole dump was written.
            what = "a directory" if os.path.isdir(self.path) else "not a regular file"
            raise DumpFormatError("not-regular-file", self.path,
                                  f"is {what}; a dump is written only as a regular file")
        if not overwrite and os.path.lexists(self.path):  # a link, even dangling, exists
            raise DumpFormatError("output-exists", self.path,
                                  "exists; refusing to overwrite it")
        # A symbolic link is followed, as open(path, "w") follows it: the dump replaces the file
        # it names and the link stays. The temporary file sits beside that file, so that the
        # final rename is one atomic step on one file system.
        self._target = os.path.realpath(self.path)
        # The name as given, made absolute now: close() asks again whether it exists, and a
        # relative name re-resolved after a chdir would ask of another file than the one the
        # dump replaces.
        self._abs_path = os.path.abspath(self.path)
        # The least version that describes the file: 1 until a member needs 2 (version.py);
        # close() writes the final value.
        self._version = 1
        root = {"ncert_schema": rules.SCHEMA, "ncert_schema_version": self._version,
                "engine": engine, "build": build, "model": model, "device": device}
        root = {k: v for k, v in root.items() if v is not None}
        check_root(root)
        folder, base = os.path.split(self._target)
        self._tmp = os.path.join(folder, f".{base}.{uuid.uuid4().hex}.partial")
        try:
            self._file = h5py.File(self._tmp, "x")
        except OSError as e:
            raise DumpFormatError("io", self.path, f"cannot create ({e})") from None
        # Until close() the file has no ncert_schema: the reader refuses it as "not an ncert
        # dump" (schema-unknown), so an unfinished dump left under its temporary name (a killed
        # process, a writer never closed) is never read as a finished one.
        self._schema = {name: root.pop(name) for name in ("ncert_schema", "ncert_schema_version")}
        h5out.write_attrs(self._file, root)
        self._runs: dict[str, tuple[int, int]] = {}  # logits run name -> (T, V)
        # logits run name -> [facts of lm_head projections naming it]
        self._pending: dict[str, list[ProjectionFacts]] = {}
        self._names: set[str] = set()  # "/projections/q", ...
        self._tensor_groups: dict[str, str] = {}  # each group a tensor name made: a tensor below it
        self._links = 0  # links below the root so far (the reader's tree-limit counts them)

    # ---- context manager ---------------------------------------------------------------------

    def __enter__(self) -> "DumpWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        if exc_type is not None:
            self.abort()
            return False
        self.close()
        return False

    @property
    def closed(self) -> bool:
        return self._file is None

    def close(self) -> None:
        """Finishes the dump and moves it to its name.

        Raises "missing-member" (and discards the file) when an lm_head projection names a
        logits run that was never added.
        """
        if self._file is None:
            return
        for run, heads in sorted(self._pending.items()):
            self.abort()
            raise DumpFormatError("missing-member", heads[0].path,
                                  f'logits_run = "{run}" names no /logits run')
        h5out.write_attrs(self._file, dict(self._schema, ncert_schema_version=self._version))
        self._file.close()
        self._file = None
        if not self.overwrite and os.path.lexists(self._abs_path):
            os.unlink(self._tmp)
            raise DumpFormatError("output-exists", self.path,
                                  "exists; refusing to overwrite it")
        try:
            os.replace(self._tmp, self._target)
        except OSError as e:
            os.unlink(self._tmp)
            raise DumpFormatError("io", self.path,
                                  f"cannot move the finished dump to its name ({e.strerror}); "
                                  "nothing was written") from None

    def abort(self) -> None:
        """Discards everything written: no file appears at `path`."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)

    # ---- members -----------------------------------------------------------------------------

    def _claim(self, root: str, name) -> str:
        if self._file is None:
            raise DumpFormatError("invalid-argument", self.path, "the writer is closed")
        what = {"projections": "projection name", "logits": "logits run name"}[root]
        check_leaf(name, f"/{root}", what)
        path = f"/{root}/{name}"
        if path in self._names:
            raise DumpFormatError("invalid-argument", path, "already written")
        return path

    @property
    def schema_version(self) -> int:
        """The ncert_schema_version the dump declares so far (written by close())."""
        return self._version

    def _need_version(self, features: list[str]) -> None:
        """Notes that the file needs version 2 when a member uses a v2 feature.

        A reader whose rule table reads version 1 only has already accepted every member by its
        own table (schema.py): such a member (a zero-point segment, a lanes walk) was part of
        its version 1, and the file stays at 1 for it.
        """
        if features and 2 in rules.VERSIONS:
            self._version = max(self._version, 2)

    def _new_links(self, path: str, groups: list[str], node) -> int:
        """The links a member adds (its objects and the groups created for it), refusing the
        member that would take the file past the reader's MAX_LINKS (tree-limit)."""
        added = _links(node) + sum(1 for g in groups if g not in self._file)
        if self._links + added > limits.MAX_LINKS:
            # The reader names the group it was listing when the count passed the limit: the
            # new member's parent ("/tensors" for a tensor, "/projections" for a projection).
            raise DumpFormatError("tree-limit", path.rsplit("/", 1)[0] or "/",
                                  f"more than {limits.MAX_LINKS} links in the file (a whole "
                                  "model's dump has a few thousand); refused")
        return added

    def _write(self, groups: list[str], name: str, node, path: str) -> None:
        """Writes one validated member as `name` below `groups` (from the root: "tensors",
        "layer0", ...), creating the groups it lacks. On any failure it removes what it created,
        the groups included, so that a failed call leaves no trace in the dump; an HDF5 failure
        is raised as "io"."""
        parent = self._file
        created = None  # the topmost group created here: removing it removes all below it
        try:
            for g in groups:
                if g in parent:
                    parent = parent[g]
                else:
                    parent = h5out.create_group(parent, g)
                    created = created or parent.name
            h5out.write_node(parent, name, node)
        except BaseException as e:
            try:
                if created is not None:
                    del self._file[created]
                elif name in parent:
                    del parent[name]
            except Exception:  # the first failure is the one to report
                pass
            if isinstance(e, (OSError, RuntimeError, ValueError)):
                raise DumpFormatError("io", path, f"cannot write ({e})") from e
            raise

    def add_projection(self, name: str, *, x, weights, accumulator, output_dtype,
                       epilogue="none", selector, k=None, n=None, in_stride=None,
                       out_stride=None, residual_at=None, k_walk=None, output_rounding=None,
                       bias=None, residual=None, commit_counts=None, requests=None,
                       block_rows=None, cap=None, y_unpacked=None, y_packed=None,
                       y_compact=None, y_before=None, role=None, logits_run=None, layer=None,
                       x_dtype=None, bias_dtype=None, residual_dtype=None,
                       weights_hash=False, omit_weights=False, x_quant=None, x_quant_group=None,
                       x_quant_rounding=None, x_quantized=None, x_scales=None,
                       x_zero_points=None, x_scales_dtype=None, bias_at=None) -> str:
        """Writes ``/projections/<name>`` (dump-format.md §3) and returns its path.

        Arrays are full-stride, exactly as in the engine's buffers: ``x`` is
        ``[M, in_stride]``, every ``y_*`` and ``residual`` ``[M, out_stride]`` (``y_compact``
        ``[P, out_stride]``), padding columns included. ``k`` and ``n`` default to what the
        weight segments state, the strides to the arrays' widths. Inputs (x, weights, bias,
        residual) given as floats are rounded to nearest even into their type; outputs
        (``y_*``) must be exact in ``output_dtype`` (uint16 patterns for bf16). See README.

        ``weights_hash=True`` declares the weights hash ``weights_xxh3`` (dump-format.md §4.5):
        a dump written so is a weights dump for step dumps with the same weights. With
        ``omit_weights=True`` the weights are still given (they are validated and hashed) but
        their group is not written: the dump declares the hash and ``ncert check --weights
        W.h5`` (or a campaign's ``"weights"``) takes them from the weights dump W.
        """
        path = self._claim("projections", name)
        node = build_projection(
            path, x=x, weights=weights, accumulator=accumulator, output_dtype=output_dtype,
            epilogue=epilogue, selector=selector, k=k, n=n, in_stride=in_stride,
            out_stride=out_stride, residual_at=residual_at, k_walk=k_walk,
            output_rounding=output_rounding, bias=bias, residual=residual,
            commit_counts=commit_counts, requests=requests, block_rows=block_rows, cap=cap,
            outputs={"y_unpacked": y_unpacked, "y_packed": y_packed, "y_compact": y_compact,
                     "y_before": y_before},
            role=role, logits_run=logits_run, layer=layer, x_dtype=x_dtype,
            bias_dtype=bias_dtype, residual_dtype=residual_dtype, x_quant=x_quant,
            x_quant_group=x_quant_group, x_quant_rounding=x_quant_rounding,
            x_quantized=x_quantized, x_scales=x_scales, x_zero_points=x_zero_points,
            x_scales_dtype=x_scales_dtype, bias_at=bias_at)
        facts = check_projection(path, node)
        check_weights_and_strides(facts)
        features = version.projection_features(path, node)
        self._need_version(features)
        if weights_hash or omit_weights:
            node.attrs["weights_xxh3"] = weights_xxh3_of_group(node.members["weight"],
                                                               node.attrs["k"], node.attrs["n"])
        if omit_weights:
            del node.members["weight"]
        head_of = facts.logits_run if facts.role == "lm_head" else None  # the run of an lm_head
        if head_of is not None and head_of in self._runs:
            check_lm_head(facts, self._runs)
        links = self._new_links(path, ["projections"], node)
        self._write(["projections"], name, node, path)
        self._links += links
        self._names.add(path)
        if head_of is not None and head_of not in self._runs:
            self._pending.setdefault(head_of, []).append(facts)  # checked at its run
        return path

    def add_logits_run(self, name: str, *, tokens, logits, positions=None, prompt_tokens=None,
                       prompt=None, tie_break=None, chunk_rows=None, compression=None,
                       vocab=None, logits_dtype=None) -> str:
        """Writes ``/logits/<name>`` (dump-format.md §5) and returns its path.

        ``tokens`` int32 ``[T]``; ``logits`` float32 ``[T, V]``, the raw rows the tokens were
        chosen from (exact: float64 values must be f32 values); ``positions`` int64 ``[T]``;
        ``prompt_tokens`` int32. ``chunk_rows`` chunks the logits by rows; ``compression``
        ("deflate" or a level 1..9) adds deflate + shuffle (chunks of about 1 MiB by default).
        """
        path = self._claim("logits", name)
        node = build_logits(path, tokens=tokens, logits=logits, positions=positions,
                            prompt_tokens=prompt_tokens, prompt=prompt, tie_break=tie_break,
                            chunk_rows=chunk_rows, compression=compression, vocab=vocab,
                            logits_dtype=logits_dtype)
        lg = node.dataset("logits")
        if lg is not None:  # the reader judges storage before the member rules
            check_chunks(path + "/logits", lg)
        t, v = check_logits(path, node)
        self._need_version(version.logits_features(path, node))
        for facts in self._pending.get(name, []):
            check_lm_head(facts, {name: (t, v)})
        links = self._new_links(path, ["logits"], node)
        self._write(["logits"], name, node, path)
        self._links += links
        self._pending.pop(name, None)
        self._runs[name] = (t, v)
        self._names.add(path)
        return path

    def add_tensor(self, name: str, array, dtype: Optional[str] = None,
                   compare: Optional[str] = None) -> str:
        """Writes ``/tensors/<name>`` (dump-format.md §6) and returns its path.

        ``name`` may hold '/' to nest (``"layer0/k_cache"``). Values are rounded to nearest
        even into ``dtype`` (f32, f16, bf16; uint16 arrays are taken as raw 16-bit patterns).
        ``compare`` is the default policy: "bitwise", "ulp:<n>" or "abs:<a>[,rel:<r>]".
        """
        if self._file is None:
            raise DumpFormatError("invalid-argument", self.path, "the writer is closed")
        if not isinstance(name, str):
            check_leaf(name, "/tensors", "tensor name")
        parts = name.split("/")
        for part in parts:
            check_leaf(part, "/tensors", "tensor name component")
        path = f"/tensors/{name}"
        if len(parts) >= limits.MAX_TREE_DEPTH:
            # /tensors is one link below the root and each component but the last a group:
            # the group MAX_TREE_DEPTH links down is where the reader stops (survey.cc).
            deepest = "/".join(["/tensors"] + parts[:limits.MAX_TREE_DEPTH - 1])
            raise DumpFormatError("tree-limit", deepest,
                                  f"groups nested deeper than {limits.MAX_TREE_DEPTH} levels (a "
                                  "dump needs 4); refused without walking further")
        # By set lookups: a scan of every name written made n tensors cost n^2 / 2 comparisons
        # (16,000 tensors took 40 s, 80 % of it here).
        ancestors = ["/".join(["/tensors"] + parts[:i + 1]) for i in range(len(parts) - 1)]
        clashing = [a for a in [path] + ancestors if a in self._names]
        other: Optional[str] = clashing[0] if clashing else None
        if other is None and path in self._tensor_groups:
            other = self._tensor_groups[path]
        if other is not None:
            raise DumpFormatError("invalid-argument", path, f"clashes with {other}")
        node = build_tensor(path, array, dtype, compare)
        check_tensor(path, node)
        self._need_version(version.tensor_features(path, node))
        links = self._new_links(path, ["tensors"] + ["/".join(["tensors"] + parts[:i + 1])
                                                     for i in range(len(parts) - 1)], node)
        self._write(["tensors"] + parts[:-1], parts[-1], node, path)
        self._links += links
        self._names.add(path)
        for a in ancestors:
            self._tensor_groups.setdefault(a, path)  # the first tensor below it, for the message
        return path


def _links(node) -> int:
    """The objects, one link each, that writing `node` creates."""
    if isinstance(node, Stored):
        return 1
    assert isinstance(node, Group)
    return 1 + sum(_links(m) for m in node.members.values())
