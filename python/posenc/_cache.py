"""posenc.KVCache: the engine API's KV cache (pe_kv_cache) through ctypes, every integer checked
before it crosses (int64: out of range raises, never wraps)."""
import ctypes

import numpy as np

from ._lib import PeErr, PePositions, _Engine, _F, _f32, _I, _P, check, int64, lib


class KVCache:
    """Keys and values of past tokens for one layer (pe_kv_cache): append k, v (B, n, Hkv*D),
    attend q (B, T, H*D) to everything cached. Rotary methods rotate keys once, on append,
    and re-rotate them exactly when the frequencies or positions change. With rope_sections
    (M-RoPE) a token has `axes` positions: positions then carry a trailing axis."""

    def __init__(self, settings, dim, batch=1, max_tokens=4096, tensors=None):
        settings = dict(settings)
        self.engine = _Engine(settings, dim, tensors)
        self.B, self.C = int64("batch", batch), int64("dim", dim)
        self.H = int(settings.get("heads", 1))
        self.Hkv = int(settings.get("kv_heads", self.H))
        self.Ckv = self.Hkv * (self.C // self.H)
        self.ptr = _P()
        err = PeErr()
        check(lib.pe_kv_cache_init(ctypes.byref(self.ptr), self.engine.layer.ptr, self.B, int64("max_tokens", max_tokens),
                                   ctypes.byref(err)), err)
        self.axes = int(lib.pe_kv_cache_axes(self.ptr))

    def _positions(self, positions, n):
        """positions [n] or [B, n], with a trailing axis [.., A] when the cache holds A > 1"""
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        tail = (self.axes,) if self.axes > 1 else ()
        batched = int(pos.ndim == 2 + len(tail))
        if pos.shape != ((self.B, n) + tail if batched else (n,) + tail):
            shapes = " or ".join(str(list(s)) for s in ((n,) + tail, (self.B, n) + tail))
            raise ValueError(f"positions: shape {list(pos.shape)}, expected {shapes}")
        return pos, batched

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.pe_kv_cache_free(self.ptr)
            self.ptr = None

    def __len__(self):
        return int(lib.pe_kv_cache_length(self.ptr, 0))

    def length(self, b=0):
        return int(lib.pe_kv_cache_length(self.ptr, int64("b", b)))

    def clear(self):
        lib.pe_kv_cache_clear(self.ptr)

    def append(self, k, v, positions=None):
        k = _f32("k", k)
        n = k.shape[1] if k.ndim == 3 else -1
        k = _f32("k", k, (self.B, n, self.Ckv))
        v = _f32("v", v, (self.B, n, self.Ckv))
        pos, batched = self._positions(positions, n) if positions is not None else (None, 0)
        err = PeErr()
        check(lib.pe_kv_cache_append(self.ptr, ctypes.byref(self.engine.weights), k.ctypes.data_as(_F),
                                     v.ctypes.data_as(_F), n, None if pos is None else pos.ctypes.data_as(_I),
                                     batched, None, ctypes.byref(err)), err)

    def attend(self, q, positions=None):
        q = _f32("q", q)
        T = q.shape[1] if q.ndim == 3 else -1
        q = _f32("q", q, (self.B, T, self.C))
        o = np.empty_like(q)
        at = PePositions()
        if positions is not None:
            pos, at.pos_batched = self._positions(positions, T)
            at.pos, at.axes = pos.ctypes.data_as(_I), self.axes
        err = PeErr()
        check(lib.pe_kv_cache_attend(self.ptr, ctypes.byref(self.engine.weights), q.ctypes.data_as(_F), T,
                                     ctypes.byref(at), o.ctypes.data_as(_F), ctypes.byref(err)), err)
        return o

    def shift(self, keep, n_drop, delta=None):
        """Drops tokens keep .. keep + n_drop - 1 of every row, moves the rest to p - delta
        (default n_drop), re-rotating their keys exactly. With position axes, delta may be one
        number per axis (M-RoPE: the time axis alone, (d, 0, 0), or every axis)."""
        err = PeErr()
        if delta is not None and np.ndim(delta) == 1:
            d = np.ascontiguousarray([int64("delta", x) for x in delta], dtype=np.int64)
            if d.shape != (self.axes,):
                raise ValueError(f"delta: {len(d)} values, the cache has {self.axes} position axes")
            check(lib.pe_kv_cache_shift_axes(self.ptr, ctypes.byref(self.engine.weights), int64("keep", keep),
                                             int64("n_drop", n_drop), d.ctypes.data_as(_I), ctypes.byref(err)), err)
            return
        check(lib.pe_kv_cache_shift(self.ptr, ctypes.byref(self.engine.weights), int64("keep", keep),
                                    int64("n_drop", n_drop), int64("delta", n_drop if delta is None else delta),
                                    ctypes.byref(err)), err)
