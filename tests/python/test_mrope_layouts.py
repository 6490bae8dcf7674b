"""Every M-RoPE layout (rope_section_layout: contiguous, interleaved, alternating, balanced) maps
each frequency pair to the same position axis in the library (pe_rope_pair_axes) as in the float64
reference (tests/ref/m_rope.py pair_axes, written from Qwen2-VL's, Qwen3-VL's, ERNIE-4.5-VL's and
openPangu's code), over every section split of up to 6 pairs per axis."""
import ctypes
import itertools

import pytest

import m_rope
from posenc import _lib

LAYOUTS = ("contiguous", "interleaved", "alternating", "balanced")


def library_axes(sections, layout):
    cfg = _lib.Config({"method": "rope", "heads": 1, "rope_sections": ",".join(map(str, sections)),
                       "rope_section_layout": layout, "rotary_dim": 2 * sum(sections)})
    half = sum(sections)
    axis = (ctypes.c_uint8 * half)()
    _lib.lib.pe_rope_pair_axes(cfg.buf, axis)
    return list(axis)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pair_axes_equal_the_reference(layout):
    _lib.lib.pe_rope_pair_axes.restype, _lib.lib.pe_rope_pair_axes.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p]
    splits = [s for A in (2, 3) for s in itertools.product(range(1, 7), repeat=A)]
    if layout == "alternating":  # three axes, as many row pairs as column pairs
        splits = [s for s in splits if len(s) == 3 and s[1] == s[2]]
    for s in splits:
        meta = {"rope_sections": ",".join(map(str, s)), "rope_section_layout": layout}
        assert library_axes(s, layout) == m_rope.pair_axes(meta, sum(s)), f"sections {s}"


def test_alternating_needs_equal_rows_and_columns():
    with pytest.raises(_lib.PosencError, match="alternating"):
        _lib.Layer({"method": "rope", "heads": 1, "rope_sections": "2,3,2", "rope_section_layout": "alternating"}, 14)
