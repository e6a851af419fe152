"""Writing validated nodes with h5py: the only module that touches HDF5.

Choices that make a file both acceptable and reproducible:

- every group and dataset is created without timestamps (track_times off), so the same
  inputs give byte-identical files;
- memory type == file type (little-endian storage dtypes), so HDF5 never converts values;
- bf16 is stored as uint16 with the string attribute dtype = "bf16" (form b), e4m3 and e5m2
  as uint8 with dtype = "e4m3" / "e5m2"; f16 as HDF5's 16-bit IEEE float, i8 as signed bytes;
- strings are UTF-8 variable-length scalars, integers int64 scalars;
- nothing is ever linked twice (no hard or soft links): every object is created once.
"""

from __future__ import annotations

import h5py
import numpy as np

from .nodes import PATTERN_TYPES, Group, Stored

__all__ = ["create_group", "write_attrs", "write_node"]

_STR = h5py.string_dtype("utf-8")


def create_group(parent: h5py.Group, name: str) -> h5py.Group:
    """A new child group without timestamps (h5py's create_group cannot switch them off)."""
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    gid = h5py.h5g.create(parent.id, name.encode("utf-8"), gcpl=gcpl)
    return h5py.Group(gid)


def require_group(parent: h5py.Group, name: str) -> h5py.Group:
    """The child group `name`, created (without timestamps) when missing."""
    if name in parent:
        return parent[name]
    return create_group(parent, name)


def write_attrs(obj, attrs: dict) -> None:
    """Attributes of validated values: str as UTF-8 strings, integers as int64 (a float, which
    validation refuses, is written as float64 as given: the tests write unvalidated members)."""
    for name, v in attrs.items():
        if isinstance(v, (str, np.str_)):
            obj.attrs.create(name, str(v), dtype=_STR)
        elif isinstance(v, (float, np.floating)):
            obj.attrs.create(name, np.float64(v), dtype=np.dtype("<f8"))
        else:
            obj.attrs.create(name, np.int64(int(v)), dtype=np.dtype("<i8"))


def _write_dataset(parent: h5py.Group, name: str, d: Stored) -> None:
    kwargs: dict[str, object] = {"track_times": False}
    if d.chunks is not None:
        kwargs["chunks"] = d.chunks
        if d.deflate is not None:
            kwargs["compression"] = "gzip"  # the deflate filter
            kwargs["compression_opts"] = int(d.deflate)
        if d.shuffle:
            kwargs["shuffle"] = True
    ds = parent.create_dataset(name, data=d.array, dtype=d.array.dtype, **kwargs)
    attrs = dict(d.attrs)
    if d.dtype in PATTERN_TYPES:
        attrs["dtype"] = d.dtype
    write_attrs(ds, attrs)


def write_node(parent: h5py.Group, name: str, node) -> None:
    """Writes `node` (a Group tree or a Stored dataset) as child `name` of `parent`."""
    if isinstance(node, Stored):
        _write_dataset(parent, name, node)
        return
    assert isinstance(node, Group)
    g = create_group(parent, name)
    write_attrs(g, node.attrs)
    for child, member in node.members.items():
        write_node(g, child, member)
