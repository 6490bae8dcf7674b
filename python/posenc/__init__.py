"""posenc: positional encodings of Transformers, exact forward and backward, from Python.

A thin binding of libposenc (the C library of this project) through ctypes; numpy is the
only dependency. The PyTorch modules are in `posenc.torch` (imported separately).

    import numpy as np, posenc
    out = posenc.attend({"method": "rope", "heads": 2},
                        {"x": x, "wq": wq, "wk": wk, "wv": wv, "wo": wo, "dy": dy})
    out["y"], out["scores"], out["probs"], out["dx"], out["dwq"]
    posenc.encode({"method": "sinusoidal"}, {"positions": np.arange(16)}, width=64)["P"]

Settings are the contract's keys (doc/spec/conformance.md, methods.md) with str, bool,
int or float values; tensors are numpy arrays under the contract's names (float32; positions
and ids int32 or int64). float64 arrays are accepted and the results returned in float64, but
the library computes in float32 (as posenc.torch). Errors of the library raise PosencError with
its one-line message.
"""
import ctypes

import numpy as np

from . import _lib
from ._cache import KVCache  # noqa: F401
from ._lib import FAMILIES, LibraryNotFound, PosencError  # noqa: F401

__version__ = "0.1.0"
__all__ = ["attend", "encode", "embed", "methods", "method_family", "method_keys", "params", "rotate",
           "KVCache", "PosencError", "LibraryNotFound", "library_path"]

library_path = _lib.path


def rotate(x, positions, settings, *, which="k", lo=None, hi=None, backward=False, tensors=None):
    """x (n, heads, head_dim) rotated as a rotary layer of settings ({"method": "rope", ...},
    every scaling, or xpos) rotates its q (which="q") or k ("k") rows at positions (n), in an
    attention over positions lo .. hi (default: their own range; dynamic NTK and LongRoPE
    choose frequencies from hi + 1, xPos centres on the range); backward=True applies the
    transpose. Angles exact in double. tensors: short_factor, long_factor (LongRoPE)."""
    return _lib.rotate(x, positions, settings, which=which, lo=lo, hi=hi, backward=backward, tensors=tensors)
_LAYER = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")


def methods():
    """The methods this build of the library implements, in registry order."""
    return _lib.methods()


def _method_id(name):
    m = _lib.lib.pe_method_from_name(str(name).encode())
    if m < 0:
        _lib.Config({"method": name})  # raises with the library's message
        raise PosencError(f"unknown method '{name}'", -2)
    return m


def method_family(name):
    """'absolute', 'rotary', 'bias' or 'relative'."""
    return FAMILIES[_lib.lib.pe_method_family(_method_id(name))]


def method_keys(name):
    """The keys method `name` accepts besides the common ones (method heads causal scale
    kv_heads)."""
    buf = ctypes.create_string_buffer(4096)
    _lib.lib.pe_method_keys(_method_id(name), buf, len(buf))
    return buf.value.decode().split()


def params(settings, dim, **overrides):
    """The method's tensors for a layer of width `dim` with these settings: a list of
    (name, shape, optional); shape[0] == -1 means any number of rows (e.g. the positions
    of a learned table). Raises PosencError when the settings are invalid."""
    return _lib.Layer(_settings(settings, overrides), dim).params()


def _settings(settings, overrides):
    s = dict(settings or {})
    s.update(overrides)
    return s


def _arrays(tensors):
    """{name: array}; float64 arrays as float32 (what the library computes in), and whether
    there was one (then the results come back in float64, as posenc.torch does)."""
    out, wide = {}, False
    for name, a in (tensors or {}).items():
        if a is None:
            continue
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {name!r}")
        a = np.asarray(a)
        if a.dtype == np.float64:
            a, wide = a.astype(np.float32), True
        out[name] = a
    return out, wide


def _widen(res, wide):
    return {n: (a.astype(np.float64) if wide and a.dtype == np.float32 else a) for n, a in res.items()} if wide else res


def attend(settings, tensors, **overrides):
    """One attention layer as the conformance contract defines it (pe_attend).

    settings: {key: value} (method and heads required); keyword arguments override them
    like `posenc attend`'s --KEY VALUE. tensors: {name: array}: x (or ids), wq wk wv wo,
    optional bq bk bv bo, positions, attn_mask (bool or uint8, 0 = masked), mems, the
    method's tensors, and dy (and dy_imag) to run the backward pass. Returns {name: float32
    array}: y, scores, probs (and y_imag), and with dy: dx and d<name> for every float input
    other than x, dy and mems.
    The projected form: q [T, H*D] (or [B, T, H*D]), k, v [Tk, Hkv*D], positions,
    key_positions, attn_mask, the method's tensors and do; returns o, scores, probs and with
    do: dq, dk, dv, d<name>."""
    arrays, wide = _arrays(tensors)
    return _widen(_lib.attend(_settings(settings, overrides), arrays), wide)


def encode(settings, tensors, width=0, **overrides):
    """An absolute method's encoding P as the library writes it (pe_encode, `posenc encode`).

    settings: method (absolute) and its keys; `heads` defaults to 1. tensors: positions [T]
    (int; complex defaults to 0..T-1), the method's tensors (pos_table, floater_*, amp freq
    phase) and, for complex, ids [T]; the layer's other tensors are ignored. width: C, or 0
    to take it from the tensors. Returns {name: array [T, C]} and the positions encoded:
      none, sinusoidal, learned  P            x' = x + P
      floater                    P_q P_k P_v  the biases added to q, k and v
      complex                    P_re P_im    the embedding of ids at the positions
    Forward only and one sequence; `embed` is the batched form with gradients."""
    arrays, wide = _arrays(tensors)
    return _widen(_lib.encode(_settings(settings, overrides), arrays, width), wide)


def embed(settings, tensors, **overrides):
    """An absolute method applied to a batch, with gradients (what posenc.torch's encoders
    call).

    Same arguments as `attend` without the layer's weights; `heads` is not needed.
      sinusoidal, learned, none: tensors x [.., T, C], positions, the method's tensors;
          returns y = x + P[positions + shift] (x for none).
      complex: ids [.., T], positions, amp, freq (phase); returns y = r cos(w p + theta)
          and y_imag = r sin(w p + theta), [.., T, C].
      floater: positions [.., T] (or x, whose shape gives the default 0..T-1) and the
          floater_* tensors; returns y = B(t) [.., T, 3, C], the biases of q, k and v.
    With dy (and dy_imag), also dx (when x was given) and d<name> of the method's tensors.

    It runs the layer on each token alone (T = 1, one head, value and output projections
    the identity), where the layer's output is exactly the encoded input, so values and
    gradients are the layer's own."""
    s = _settings(settings, overrides)
    if "method" not in s:
        raise PosencError("key 'method' is required", -2)
    method = str(s["method"])
    fam = method_family(method)
    if fam != "absolute":
        raise ValueError(f"embed: method '{method}' is {fam}, not absolute; its positions act "
                         "inside attention (use attend or posenc.torch.Attention)")
    t, wide = _arrays(tensors)
    for n in _LAYER:
        if n in t:
            raise ValueError(f"embed: tensor '{n}' is a layer weight; embed takes the method's "
                             "tensors only")
    s = {k: v for k, v in s.items() if k not in ("heads", "kv_heads", "causal", "scale")}
    s["heads"] = 1
    if method == "floater":
        return _widen(_embed_floater(s, t), wide)

    tok = "ids" if "ids" in t else "x"
    if tok not in t:
        raise PosencError("tensor 'x' is missing", -3)
    a = t.pop(tok)
    if tok == "x":
        if a.ndim not in (2, 3):
            raise PosencError(f"tensor 'x': expected [T, C] or [B, T, C], got {a.ndim} dimensions", -3)
        lead, C = a.shape[:-1], a.shape[-1]
    else:
        if a.ndim not in (1, 2):
            raise PosencError(f"tensor 'ids': expected [T] or [B, T], got {a.ndim} dimensions", -3)
        if "amp" not in t or t["amp"].ndim != 2:
            raise PosencError("tensor 'amp' is missing or not [V, C]", -3)
        lead, C = a.shape, t["amp"].shape[1]
    N = int(np.prod(lead))
    inp = {tok: a.reshape((N, 1, C) if tok == "x" else (N, 1))}
    inp["positions"] = _token_positions(t.pop("positions", None), lead)
    inp.update(_identity_layer(C))
    grads = {}
    for g in ("dy", "dy_imag"):
        if g in t:
            d = t.pop(g)
            if d.shape != tuple(lead) + (C,):
                raise PosencError(f"tensor '{g}': shape {list(d.shape)}, expected "
                                  f"{list(lead) + [C]}", -3)
            grads[g] = d.reshape(N, 1, C)
    inp.update(t)
    inp.update(grads)
    out = _lib.attend(s, inp)
    res = {}
    for name, v in out.items():
        if name in ("y", "y_imag", "dx"):
            res[name] = v.reshape(tuple(lead) + (C,))
        elif name.startswith("d") and name[1:] in t:
            res[name] = v
    return _widen(res, wide)


def _identity_layer(C):
    # wq = wk = 0 and bq = bk = 1 keep every score finite and its gradient defined (complex
    # takes a modulus); the single key gets probability exactly 1, and v, y pass the
    # encoded token through unchanged.
    z, one, eye = np.zeros((C, C), np.float32), np.ones(C, np.float32), np.eye(C, dtype=np.float32)
    return {"wq": z, "wk": z, "bq": one, "bk": one, "wv": eye, "wo": eye}


def _token_positions(pos, lead):
    """Positions of every token of a [.., T] batch, one token per row: [N, 1] int64."""
    T = lead[-1]
    if pos is None:
        pos = np.arange(T, dtype=np.int64)
    pos = np.asarray(pos)
    if pos.dtype.kind not in "iu":
        raise PosencError(f"tensor 'positions': dtype {pos.dtype}, expected int32 or int64", -3)
    if pos.shape not in ((T,), tuple(lead)):
        raise PosencError(f"tensor 'positions': shape {list(pos.shape)}, expected [{T}]"
                          + (" or [B, T]" if len(lead) == 2 else ""), -3)
    return np.broadcast_to(pos, lead).reshape(-1, 1).astype(np.int64)


def _embed_floater(s, t):
    x = t.pop("x", None)
    pos = t.pop("positions", None)
    dy = t.pop("dy", None)
    if "floater_b0" not in t or t["floater_b0"].ndim != 2 or t["floater_b0"].shape[0] != 3:
        raise PosencError("tensor 'floater_b0' is missing or not [3, C]", -3)
    b0 = t["floater_b0"]
    C = b0.shape[1]
    if pos is not None:
        pos = np.asarray(pos)
        lead = pos.shape if x is None or pos.ndim == x.ndim - 1 else x.shape[:-1]
    elif x is not None:
        lead = x.shape[:-1]
    else:
        raise PosencError("tensor 'positions' is missing (floater needs positions or x)", -3)
    N = int(np.prod(lead))
    inp = {"x": np.zeros((N, 1, C), np.float32), "positions": _token_positions(pos, lead)}
    inp.update(_identity_layer(C))
    if dy is not None and dy.shape != tuple(lead) + (3, C):
        raise PosencError(f"tensor 'dy': shape {list(dy.shape)}, expected {list(lead) + [3, C]}", -3)
    y = np.empty(tuple(lead) + (3, C), np.float32)
    res = {}
    # The flow acts on each row of B alone with shared weights: row r's trajectory is the
    # value row of a layer whose three initial rows are all b0[r].
    for r in range(3):
        tr = dict(t)
        tr["floater_b0"] = np.ascontiguousarray(np.broadcast_to(b0[r], (3, C)), dtype=b0.dtype)
        if dy is not None:
            tr["dy"] = np.ascontiguousarray(dy[..., r, :]).reshape(N, 1, C)
        out = _lib.attend(s, {**inp, **tr})
        y[..., r, :] = out["y"].reshape(tuple(lead) + (C,))
        if dy is None:
            continue
        for name in t:
            g = out["d" + name]
            if name == "floater_b0":
                res.setdefault("dfloater_b0", np.zeros_like(g))[r] += g.sum(0)
            else:
                res["d" + name] = res["d" + name] + g if "d" + name in res else g
    res["y"] = y
    if dy is not None and x is not None:
        res["dx"] = np.zeros_like(x, dtype=np.float32)
    return dict(sorted(res.items(), key=lambda kv: kv[0] != "y"))
