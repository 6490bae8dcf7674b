"""posenc.torch's bridge to the library: the autograd Functions over the contract's entry point
(_Fn: attend and embed, recomputing the forward in backward) and the fast path (_LayerFn, _QkvFn:
one library layer per call, kept for its backward), the projected form as a PyTorch operator
(torch.ops.posenc.attention), and the helpers they share. Private: the public names are
posenc.torch's."""
import ctypes
import json

import torch
from torch.autograd.function import once_differentiable

import posenc
from posenc import _lib

_LAYER = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")
_NO_GRAD = ("mems",)        # the contract returns no gradient for these


# ---- the autograd bridge -----------------------------------------------------------------
def _to_numpy(name, t):
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    if t.device.type != "cpu":
        raise ValueError(f"tensor '{name}' is on {t.device}: posenc runs on the CPU "
                         "(move the module and its inputs with .cpu())")
    t = t.detach()
    if t.is_floating_point():
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"tensor '{name}': dtype {t.dtype}, expected float32 (or float64)")
        t = t.to(torch.float32)
    elif name == "attn_mask" and t.dtype in (torch.bool, torch.uint8):
        pass
    elif t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"tensor '{name}': dtype {t.dtype}, expected float32, int32 or int64")
    return t.contiguous().numpy()


def _out_dtype(names, tensors):
    for n, t in zip(names, tensors):
        if n in ("x", "q"):
            return t.dtype if t.dtype == torch.float64 else torch.float32
    return torch.float32


class _Fn(torch.autograd.Function):
    """Forward: fn(settings, arrays) without dy. Backward: the same call with dy (and
    dy_imag): gradients d<name> (dx for x) of every float input."""

    @staticmethod
    def forward(ctx, fn, settings, names, outs, *tensors):
        arrays = {n: _to_numpy(n, t) for n, t in zip(names, tensors)}
        res = fn(settings, arrays)
        dtype = _out_dtype(names, tensors)
        ctx.fn, ctx.settings, ctx.names = fn, settings, names
        ctx.diff = [o for o in outs if o in ("y", "y_imag", "o") and o in res]
        ctx.save_for_backward(*tensors)
        result = [torch.from_numpy(res[o]).to(dtype) if o in res else torch.empty(0) for o in outs]
        ctx.mark_non_differentiable(*[r for o, r in zip(outs, result) if o not in ctx.diff])
        ctx.outs = outs
        return tuple(result)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        arrays = {n: _to_numpy(n, t) for n, t in zip(ctx.names, tensors)}
        for o, g in zip(ctx.outs, grads):
            if o in ctx.diff:
                arrays["d" + o] = _to_numpy("d" + o, g)
        res = ctx.fn(ctx.settings, arrays)
        out = [None, None, None, None]
        for n, t in zip(ctx.names, tensors):
            g = None
            if t.is_floating_point() and n not in _NO_GRAD:
                g = res.get("dx" if n == "x" else "d" + n)
                g = None if g is None else torch.from_numpy(g).to(t.dtype)
            out.append(g)
        return tuple(out)


# ---- the fast path: one library layer per call, kept for its backward ----------------------
class _Spec:
    """What a call of one configuration needs, made once per module (or per settings in the
    functional form): the library's pe_config, the widths, the order of the method's tensors in
    pe_weights.param and their shapes."""

    def __init__(self, settings, C):
        self.settings = dict(settings)
        self.cfg = _lib.Config(settings)
        layer = _lib.Layer(settings, C)
        self.C, self.D = int(C), int(layer.head_dim())
        self.H = self.C // self.D
        self.Hkv = int(settings.get("kv_heads", self.H))
        self.memory = layer.has_memory()
        self.params = layer.params()  # [(name, shape, optional)]


_SPECS = {}


def _spec_of(settings, C):
    key = (tuple(sorted(settings.items())), int(C))
    spec = _SPECS.get(key)
    if spec is None:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        spec = _SPECS[key] = _Spec(settings, C)
    return spec


def _f32(t):
    """t as contiguous float32 without a copy where it already is (detached: autograd is ours)."""
    t = t.detach()
    return (t if t.dtype == torch.float32 else t.float()).contiguous()


def _addr(t):
    return None if t is None else t.data_ptr()


def _weights(spec, layer, method, tensors):
    """The PeWeights of the layer's projections (layer: 8 tensors or None) and the method's
    tensors ({name: tensor}), each checked against its shape (the library reads raw memory)."""
    w = _lib.PeWeights()
    keep = []
    C, Ckv = spec.C, spec.Hkv * spec.D
    if layer is not None:
        shapes = ((C, C), (Ckv, C), (Ckv, C), (C, C), (C,), (Ckv,), (Ckv,), (C,))
        for i, (name, t, shape) in enumerate(zip(_LAYER, layer, shapes)):
            if t is None:
                continue
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {list(t.shape)}, expected {list(shape)}")
            t = _f32(t)
            keep.append(t)
            w.w[i] = t.data_ptr()
    known = {n for n, _, _ in spec.params}
    for name in tensors:
        if name not in known:
            raise posenc.PosencError(f"tensor '{name}': method {method} takes "
                                     f"{', '.join(sorted(known)) or 'no tensors'}", -3)
    for i, (name, shape, optional) in enumerate(spec.params):
        t = tensors.get(name)
        if t is None:
            if not optional:
                raise posenc.PosencError(f"tensor '{name}' is required by method {method}", -3)
            continue
        want = tuple(t.shape[0] if d == -1 else d for d in shape)
        if t.dim() != len(shape) or tuple(t.shape) != want:
            raise posenc.PosencError(f"tensor '{name}': shape {list(t.shape)}, expected {list(want)}", -3)
        t = _f32(t)
        keep.append(t)
        w.param[i] = t.data_ptr()
        w.param_rows[i] = t.shape[0]
    return w, keep


def _where(call, w, positions, key_positions, mask, B, T, Tk, batched):
    """The PePositions of a call, each tensor checked against the shape the library reads."""
    at = _lib.PePositions()
    keep = []
    A = call.axes(w)
    tail = (A,) if A > 1 else ()
    for name, p, n, field in (("positions", positions, T, "pos"), ("key_positions", key_positions, Tk, "key_pos")):
        if p is None:
            continue
        p = p.detach().to(torch.int64).contiguous()
        if tuple(p.shape) == (n,) + tail:
            pass
        elif batched and tuple(p.shape) == (B, n) + tail:
            setattr(at, field + "_batched", 1)
        else:
            want = f"[{', '.join(map(str, (n,) + tail))}]" + (f" or [{B}, {', '.join(map(str, (n,) + tail))}]" if batched else "")
            raise posenc.PosencError(f"tensor '{name}': shape {list(p.shape)}, expected {want}", -3)
        keep.append(p)
        setattr(at, field, ctypes.cast(p.data_ptr(), ctypes.POINTER(ctypes.c_int64)))
    at.axes = A if A > 1 else 0
    if mask is not None:
        m = torch.as_tensor(mask).detach()
        if m.dtype not in (torch.bool, torch.uint8):
            raise TypeError(f"attn_mask: dtype {m.dtype}, expected bool or uint8 (True takes part)")
        m = m.contiguous()
        if tuple(m.shape) == (T, Tk):
            pass
        elif batched and tuple(m.shape) == (B, T, Tk):
            at.mask_batched = 1
        else:
            raise posenc.PosencError(f"tensor 'attn_mask': shape {list(m.shape)}, expected [{T}, {Tk}]"
                                     + (f" or [{B}, {T}, {Tk}]" if batched else ""), -3)
        keep.append(m)
        at.mask = m.data_ptr()  # bool is one byte 0/1: the library's uint8 mask
    return at, keep


def _grads_of(spec, layer, tensors, need):
    """Zeroed gradients (the library accumulates) for the tensors that need one; PeGrads."""
    g = _lib.PeGrads()
    out_layer, out_params = [None] * 8, {}
    for i, t in enumerate(layer or ()):
        if t is not None and need(t):
            out_layer[i] = torch.zeros(t.shape, dtype=torch.float32)
            g.d[i] = out_layer[i].data_ptr()
    for i, (name, _, _) in enumerate(spec.params):
        t = tensors.get(name)
        if t is not None and need(t):
            out_params[name] = torch.zeros(t.shape, dtype=torch.float32)
            g.dparam[i] = out_params[name].data_ptr()
    return g, out_layer, out_params


def _dropout_seed():
    """A seed from torch's default generator, so torch.manual_seed reproduces the mask."""
    return int(torch.randint(0, 2 ** 62, (1,), dtype=torch.int64).item())


class _LayerFn(torch.autograd.Function):
    """The layer on x: forward into a library layer of its own (kept in ctx), backward from
    what it saved. Inputs after the fixed ones: the 8 projection tensors (None: absent), then
    the method's tensors in `names` order."""

    @staticmethod
    def forward(ctx, spec, method, names, need_weights, dropout, positions, mask, x, mems, *tensors):
        layer, params = list(tensors[:8]), dict(zip(names, tensors[8:]))
        params = {n: t for n, t in params.items() if t is not None}
        B, T = (x.shape[0], x.shape[1]) if x.dim() == 3 else (1, x.shape[0])
        M = 0 if mems is None else mems.shape[-2]
        # as _QkvFn: the library reads x in place again in backward (pe_run_options.saved; x32
        # stays in ctx.keep, x is saved so that an in-place change is caught), or keeps nothing
        saved = _lib.SAVED_INPUTS if any(ctx.needs_input_grad) else _lib.SAVED_NONE
        call = _lib.Call(spec.cfg, spec.C, torch.get_num_threads(), saved)
        if dropout > 0:
            call.dropout(dropout, _dropout_seed())
        w, keep = _weights(spec, layer, method, params)
        at, keep_at = _where(call, w, positions, None, mask, B, T, T + M, x.dim() == 3)
        x32 = _f32(x)
        m32 = None if mems is None else _f32(mems)
        if m32 is not None and tuple(m32.shape) not in ((B, M, spec.C), (M, spec.C)[: 3 - x.dim()] + ((spec.C,) if x.dim() == 2 else ())):
            raise ValueError(f"mems: shape {list(mems.shape)}, expected [B, M, {spec.C}] like x")
        y = torch.empty(x32.shape, dtype=torch.float32)
        lead = (B,) if x.dim() == 3 else ()
        probs = torch.empty(lead + (spec.H, T, T + M), dtype=torch.float32) if need_weights else None
        call.forward(w, x32.data_ptr(), _addr(m32), M, B, T, at, y.data_ptr(), _addr(probs))
        ctx.call, ctx.spec, ctx.w, ctx.keep = call, spec, w, (keep, keep_at, x32, m32)  # the layer reads them again
        ctx.layer, ctx.params, ctx.named, ctx.dtype = layer, params, list(zip(names, tensors[8:])), x.dtype
        ctx.x_grad = x.requires_grad
        ctx.save_for_backward(x, *[t for t in tensors if t is not None])  # in-place changes are caught
        out = y if x.dtype == torch.float32 else y.to(x.dtype)
        if probs is None:
            return out, torch.empty(0)
        ctx.mark_non_differentiable(probs)
        return out, probs

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dprobs):
        ctx.saved_tensors  # raises if a tensor was changed in place since the forward
        spec = ctx.spec
        g, dlayer, dparams = _grads_of(spec, ctx.layer, ctx.params, lambda t: t.requires_grad)
        dy32 = _f32(dy)
        dx = torch.empty(dy32.shape, dtype=torch.float32) if ctx.x_grad else None
        ctx.call.backward(ctx.w, dy32.data_ptr(), _addr(dx), g)
        ctx.call = None  # the layer and its saved activations go now
        dt = ctx.dtype

        def cast(t, like):
            return None if t is None else t.to(like.dtype)
        grads = [cast(d, t) if t is not None else None for d, t in zip(dlayer, ctx.layer)]
        grads += [cast(dparams.get(n), t) if t is not None else None for n, t in ctx.named]
        return (None, None, None, None, None, None, None, None if dx is None else dx.to(dt), None, *grads)


class _QkvFn(torch.autograd.Function):
    """The projected form on q, k, v [B, T, H*D] / [B, Tk, Hkv*D] (heads concatenated), as
    _LayerFn: one library layer per call, its backward from what it saved."""

    @staticmethod
    def forward(ctx, spec, method, names, dropout, positions, key_positions, mask, q, k, v, *tensors):
        params = {n: t for n, t in zip(names, tensors) if t is not None}
        B, T, Tk = q.shape[0], q.shape[1], k.shape[1]
        # the library reads q, k, v in place again in backward (pe_run_options.saved): q32, k32,
        # v32 stay in ctx.keep, and q, k, v are saved so that an in-place change is caught; with
        # no gradient to take (torch.no_grad, nothing requiring one) it keeps nothing
        saved = _lib.SAVED_INPUTS if any(ctx.needs_input_grad) else _lib.SAVED_NONE
        call = _lib.Call(spec.cfg, spec.C, torch.get_num_threads(), saved)
        if dropout > 0:
            call.dropout(dropout, _dropout_seed())
        w, keep = _weights(spec, None, method, params)
        at, keep_at = _where(call, w, positions, key_positions, mask, B, T, Tk, True)
        q32, k32, v32 = _f32(q), _f32(k), _f32(v)
        o = torch.empty(q32.shape, dtype=torch.float32)
        call.forward_qkv(w, q32.data_ptr(), k32.data_ptr(), v32.data_ptr(), B, T, Tk, at, o.data_ptr(), None)
        ctx.call, ctx.w, ctx.keep, ctx.spec = call, w, (keep, keep_at, q32, k32, v32), spec  # read again by backward
        ctx.named, ctx.params, ctx.dtype = list(zip(names, tensors)), params, q.dtype
        ctx.need = (q.requires_grad, k.requires_grad, v.requires_grad)
        ctx.shapes = (q32.shape, k32.shape)
        ctx.save_for_backward(q, k, v, *params.values())
        return o if q.dtype == torch.float32 else o.to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        ctx.saved_tensors
        g, _, dparams = _grads_of(ctx.spec, None, ctx.params, lambda t: t.requires_grad)
        (qs, ks), (nq, nk, nv) = ctx.shapes, ctx.need
        dq = torch.empty(qs, dtype=torch.float32) if nq else None
        dk = torch.empty(ks, dtype=torch.float32) if nk else None
        dv = torch.empty(ks, dtype=torch.float32) if nv else None
        do32 = _f32(do)  # held in a name: a temporary's memory would go before the call reads it
        ctx.call.backward_qkv(ctx.w, do32.data_ptr(), _addr(dq), _addr(dk), _addr(dv), g)
        ctx.call = None
        cast = (lambda t: None if t is None else t.to(ctx.dtype))
        grads = [None if t is None or dparams.get(n) is None else dparams[n].to(t.dtype) for n, t in ctx.named]
        return (None,) * 7 + (cast(dq), cast(dk), cast(dv), *grads)


# ---- the layer and the projected form as operators: torch.ops.posenc.layer, .attention ------
# A trace (torch.jit.trace) of a model that calls the library through ctypes would freeze the
# library's results into constants; registered as operators (torch.library, PyTorch 1.13 and
# later), each call is one node of the graph, run by its kernel each time, with its autograd.
# torch.compile (PyTorch 2) would see the same node; PyTorch 1.13 has no torch.compile.
_QKV_SCHEMA = ("attention(Tensor q, Tensor k, Tensor v, str settings, Tensor? positions, Tensor? key_positions, "
               "Tensor? attn_mask, float dropout_p, str names, Tensor[] tensors) -> Tensor")  # names: comma-separated (a trace takes no str[])


def _qkv_kernel(q, k, v, settings, positions, key_positions, attn_mask, dropout_p, names, tensors):
    """q [B, H, T, D] or [H, T, D], k, v [B, Hkv, Tk, D]: posenc.torch.attention's checked
    arguments, its settings as JSON text, the names of the method's tensors comma-separated;
    returns o as q."""
    s = json.loads(settings)
    batched = q.dim() == 4
    H, T, D = q.shape[-3:]

    def heads_last(x):  # [B, H, n, D] -> [B, n, H*D]
        x = x if batched else x[None]
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)

    o = _QkvFn.apply(_spec_of(s, H * D), s["method"], tuple(names.split(",")) if names else (), float(dropout_p),
                     positions, key_positions,
                     attn_mask, heads_last(q), heads_last(k), heads_last(v), *tensors)
    o = o.view(-1, T, H, D).transpose(1, 2)
    return o if batched else o[0]


_LAYER_SCHEMA = ("layer(Tensor x, str settings, Tensor? positions, Tensor? mems, Tensor? attn_mask, bool need_weights, "
                 "float dropout_p, str names, Tensor[] tensors) -> (Tensor, Tensor)")


def _layer_kernel(x, settings, positions, mems, attn_mask, need_weights, dropout_p, names, tensors):
    """posenc.torch.Attention's layer on x: the projections (wq..bo) and the method's tensors
    in one list, named in `names` (comma-separated); returns y and probs (empty unless
    need_weights)."""
    s = json.loads(settings)
    given = dict(zip(names.split(","), tensors)) if names else {}
    own = tuple(n for n in given if n not in _LAYER)
    return _LayerFn.apply(_spec_of(s, int(x.shape[-1])), s["method"], own, bool(need_weights), float(dropout_p),
                          positions, attn_mask, x, mems, *[given.get(n) for n in _LAYER], *[given[n] for n in own])


def _register():
    """The operators' library (kept: it unregisters them when collected), or None where this
    PyTorch has no torch.library or the names are taken (a second import)."""
    try:
        lib = torch.library.Library("posenc", "DEF")
        for name, schema, kernel in (("attention", _QKV_SCHEMA, _qkv_kernel), ("layer", _LAYER_SCHEMA, _layer_kernel)):
            lib.define(schema)
            for key in ("CPU", "Autograd"):  # Autograd: the kernel builds its own graph (_QkvFn, _LayerFn)
                lib.impl(name, kernel, key)
        return lib
    except (AttributeError, RuntimeError):
        return None


_OPS = _register()


def _traceable():
    """Whether the operators are registered (a trace records them)."""
    return _OPS is not None


def qkv_attention(q, k, v, settings, positions, key_positions, attn_mask, dropout_p, names, tensors):
    """The projected form through torch.ops.posenc.attention where it is registered, else the
    kernel itself."""
    given = [(n, t if isinstance(t, torch.Tensor) else torch.as_tensor(t)) for n, t in zip(names, tensors) if t is not None]
    args = (q, k, v, json.dumps(settings, sort_keys=True), positions, key_positions, attn_mask, float(dropout_p),
            ",".join(n for n, _ in given), [t for _, t in given])
    return torch.ops.posenc.attention(*args) if _OPS is not None else _qkv_kernel(*args)


def layer(x, settings, positions, mems, attn_mask, need_weights, dropout_p, tensors):
    """The layer through torch.ops.posenc.layer where it is registered, else the kernel itself;
    tensors {name: tensor or None} (the projections and the method's)."""
    given = [(n, t) for n, t in tensors.items() if t is not None]
    args = (x, json.dumps(settings, sort_keys=True), positions, mems, attn_mask, bool(need_weights), float(dropout_p),
            ",".join(n for n, _ in given), [t for _, t in given])
    return torch.ops.posenc.layer(*args) if _OPS is not None else _layer_kernel(*args)


def _split(tensors):
    names, values = [], []
    for n, t in tensors.items():
        if t is None:
            continue
        if not isinstance(n, str):
            raise TypeError(f"tensor names must be str, got {n!r}")
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        names.append(n)
        values.append(t)
    return tuple(names), values


def _text_settings(settings, overrides):
    s = dict(settings or {})
    s.update(overrides)
    return {str(k): _lib.text(v, k) for k, v in s.items()}
