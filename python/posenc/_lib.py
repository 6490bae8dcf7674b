"""ctypes binding of libposenc: finding the library, the C structs, errors.

Only the public API of include/posenc.h is used. The numpy functions built on it live in
posenc/__init__.py.
"""
import ctypes
import ctypes.util
import os
import sys

import numpy as np

PE_MAX_DIMS = 4  # include/posenc.h
# Room for pe_param_spec arrays, generous so that methods added to the library later never
# overrun what Python allocates (a pe_config's size the library says: pe_config_size).
_MAX_SPECS = 64
_MAX_PARAMS = 12  # PE_MAX_PARAMS

# pe_status codes (PE_STATUS_MAP in include/posenc.h)
STATUS_NAMES = {0: "OK", -1: "EINVAL", -2: "EKEY", -3: "ETENSOR", -4: "EPOS", -5: "ENOMEM",
                -6: "EIO", -7: "EFORMAT"}
FAMILIES = ("absolute", "rotary", "bias", "relative")  # pe_family order


class PosencError(ValueError):
    """An error reported by libposenc. str(e) is the library's one-line message (it names
    the key or tensor); e.status is the pe_status code and e.status_name its name
    ("EKEY", "ETENSOR", ...)."""

    def __init__(self, message, status=-1):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, str(status))


class LibraryNotFound(ImportError):
    pass


class PeErr(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 512)]


class PeTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * PE_MAX_DIMS), ("data", ctypes.c_void_p)]


class PeInit(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("a", ctypes.c_double), ("b", ctypes.c_double)]


class PeParamSpec(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * PE_MAX_DIMS), ("optional", ctypes.c_int), ("init", PeInit),
                ("shared", ctypes.c_int), ("layernormed", ctypes.c_int), ("token_rows", ctypes.c_int),
                ("clamped", ctypes.c_int), ("clamp_min", ctypes.c_double)]


class _PeMethodInfoFields(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("reference", ctypes.c_char_p)] + [(f, ctypes.c_int) for f in (
        "family fused gqa projected memory multi_axis token_ids embedding relative_index scale_in_init axes_min causal_only").split()]


PE_METHOD_INFO_BYTES = 256


class PeMethodInfo(ctypes.Union):  # pe_method_info (include/posenc/core.h): fields in a fixed size
    _anonymous_ = ("f",)
    _fields_ = [("f", _PeMethodInfoFields), ("bytes_", ctypes.c_ubyte * PE_METHOD_INFO_BYTES)]


# pe_init kinds (include/posenc.h): how a method's reference initialises a tensor
INIT_KINDS = {1: "normal", 2: "uniform", 3: "const", 4: "xavier", 5: "linear", 6: "alibi_slopes",
              7: "complex_freq", 8: "eye_normal"}


LIBNAME = "libposenc.so" if sys.platform != "darwin" else "libposenc.dylib"


def candidates():
    """Where the library is looked for, in order: $POSENC_LIBRARY; next to the package;
    the source tree's build/ (python/posenc -> ../../build); the install prefix (every
    ancestor of the package holding lib/libposenc.so or libposenc.so, then sys.prefix);
    the system's linker path."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    env = os.environ.get("POSENC_LIBRARY")
    if env:
        out.append(env)
    out.append(os.path.join(here, LIBNAME))
    out.append(os.path.join(here, "..", "..", "build", LIBNAME))
    d = here
    for _ in range(6):
        d = os.path.dirname(d)
        out += [os.path.join(d, LIBNAME), os.path.join(d, "lib", LIBNAME)]
    for p in {sys.prefix, sys.base_prefix, "/usr/local"}:
        out.append(os.path.join(p, "lib", LIBNAME))
    return out


def _load():
    env = os.environ.get("POSENC_LIBRARY")
    if env and not os.path.exists(env):
        raise LibraryNotFound(f"POSENC_LIBRARY={env}: no such file")
    for path in candidates():
        if os.path.exists(path):
            return ctypes.CDLL(os.path.abspath(path)), os.path.abspath(path)
    found = ctypes.util.find_library("posenc")
    if found:
        return ctypes.CDLL(found), found
    raise LibraryNotFound(
        "libposenc.so not found: build it (`make` at the project root), install it "
        "(`make install PREFIX=...`), or set POSENC_LIBRARY to its path")


lib, path = _load()

_P = ctypes.c_void_p
_sig = {
    "pe_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "pe_method_name": (ctypes.c_char_p, [ctypes.c_int]),
    "pe_method_family": (ctypes.c_int, [ctypes.c_int]),
    "pe_method_from_name": (ctypes.c_int, [ctypes.c_char_p]),
    "pe_method_keys": (None, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    "pe_method_describe": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(PeMethodInfo), ctypes.POINTER(PeErr)]),
    "pe_alibi_slopes": (None, [ctypes.POINTER(ctypes.c_double), ctypes.c_int64]),
    "pe_config_init": (None, [_P]),
    "pe_config_size": (ctypes.c_size_t, []),
    "pe_config_set": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(PeErr)]),
    "pe_attention_init": (ctypes.c_int, [ctypes.POINTER(_P), _P, ctypes.c_int64,
                                         ctypes.POINTER(PeErr)]),
    "pe_attention_free": (None, [_P]),
    "pe_attention_head_dim": (ctypes.c_int64, [_P]),
    "pe_attention_params": (ctypes.c_int, [_P, ctypes.POINTER(PeParamSpec)]),
    "pe_attention_has_memory": (ctypes.c_int, [_P]),
    "pe_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "pe_attend": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                 ctypes.POINTER(PeTensor), ctypes.POINTER(ctypes.POINTER(PeTensor)),
                                 ctypes.POINTER(ctypes.c_int), ctypes.POINTER(PeErr)]),
    "pe_tensors_free": (None, [ctypes.POINTER(PeTensor), ctypes.c_int]),
}
for _name, (_res, _args) in _sig.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args
# the engine API: rotations on caller buffers and the KV cache (include/posenc.h)
_F = ctypes.POINTER(ctypes.c_float)
_I = ctypes.POINTER(ctypes.c_int64)
HAS_CACHE = hasattr(lib, "pe_kv_cache_init")
if HAS_CACHE:
    for _name, (_res, _args) in {
        "pe_attention_rotate": (ctypes.c_int, [_P, _P, _F, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _I,
                                               ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                               ctypes.POINTER(PeErr)]),
        "pe_kv_cache_init": (ctypes.c_int, [ctypes.POINTER(_P), _P, ctypes.c_int64, ctypes.c_int64,
                                            ctypes.POINTER(PeErr)]),
        "pe_kv_cache_free": (None, [_P]),
        "pe_kv_cache_clear": (None, [_P]),
        "pe_kv_cache_length": (ctypes.c_int64, [_P, ctypes.c_int64]),
        "pe_kv_cache_append": (ctypes.c_int, [_P, _P, _F, _F, ctypes.c_int64, _I, ctypes.c_int, _I,
                                              ctypes.POINTER(PeErr)]),
        "pe_kv_cache_attend": (ctypes.c_int, [_P, _P, _F, ctypes.c_int64, _P, _F, ctypes.POINTER(PeErr)]),
        "pe_kv_cache_shift": (ctypes.c_int, [_P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                             ctypes.POINTER(PeErr)]),
        "pe_kv_cache_shift_axes": (ctypes.c_int, [_P, _P, ctypes.c_int64, ctypes.c_int64, _I, ctypes.POINTER(PeErr)]),
        "pe_kv_cache_axes": (ctypes.c_int64, [_P]),
    }.items():
        _f = getattr(lib, _name)
        _f.restype, _f.argtypes = _res, _args


class PeWeights(ctypes.Structure):
    _fields_ = [("w", _P * 8), ("param", _P * _MAX_PARAMS), ("param_rows", ctypes.c_int64 * _MAX_PARAMS)]


class PePositions(ctypes.Structure):
    _fields_ = [("pos", _I), ("pos_batched", ctypes.c_int), ("key_pos", _I), ("key_pos_batched", ctypes.c_int),
                ("mask", _P), ("mask_batched", ctypes.c_int), ("q_lens", _I), ("k_lens", _I),
                ("axes", ctypes.c_int64)]


class PeGrads(ctypes.Structure):
    _fields_ = [("d", _P * 8), ("dparam", _P * _MAX_PARAMS)]


class PeRunOptions(ctypes.Structure):
    _fields_ = [("path", ctypes.c_int), ("threads", ctypes.c_int), ("isa", ctypes.c_char * 16),
                ("keep_mxcsr", ctypes.c_int), ("denormals", ctypes.c_int), ("saved", ctypes.c_int)]


SAVED_COPIES, SAVED_INPUTS, SAVED_NONE = 0, 1, 2  # pe_run_options.saved


# the layer API itself (include/posenc.h): one forward into a layer that keeps what its
# backward needs, for callers that hold their buffers (posenc.torch's fast path)
_E = ctypes.POINTER(PeErr)
for _name, (_res, _args) in {
    "pe_attention_set_run_options": (None, [_P, ctypes.POINTER(PeRunOptions)]),
    "pe_attention_layer_forward": (ctypes.c_int, [_P, _P, _P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                                  _P, _P, _P, _P, _E]),
    "pe_attention_backward": (ctypes.c_int, [_P, _P, _P, _P, _P, _E]),
    "pe_attention_forward_qkv": (ctypes.c_int, [_P, _P, _P, _P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                                _P, _P, _P, _P, _E]),
    "pe_attention_backward_qkv": (ctypes.c_int, [_P, _P, _P, _P, _P, _P, _P, _E]),
    "pe_attention_axes": (ctypes.c_int64, [_P, _P]),
    "pe_attention_set_dropout": (ctypes.c_int, [_P, ctypes.c_double, ctypes.c_uint64, _E]),
    "pe_config_from_hf": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int64, _P, _E]),
    "pe_config_is_set": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "pe_config_key_name": (ctypes.c_char_p, [ctypes.c_int]),
    "pe_config_key_type": (ctypes.c_char_p, [ctypes.c_int]),
    "pe_config_key_value": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
}.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def _f32(name, x, shape=None):
    a = np.ascontiguousarray(x, dtype=np.float32)
    if shape is not None and a.shape != tuple(shape):
        raise ValueError(f"{name}: shape {list(a.shape)}, expected {list(shape)}")
    return a


def int64(name, v):
    """v as a C int64_t, or a PosencError naming it: ctypes would wrap 2^64 to 0 silently."""
    v = int(v)
    if not -(1 << 63) <= v < (1 << 63):
        raise PosencError(f"{name}: {v} does not fit a 64-bit integer")
    return v


def _i64(name, x, n):
    a = np.ascontiguousarray(x, dtype=np.int64)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name}: expected {n} positions, got shape {list(a.shape)}")
    return a


class _Engine:
    """A layer for the engine calls, with the method's tensors as pe_weights (kept alive here)."""

    def __init__(self, settings, C, tensors):
        if not HAS_CACHE:
            raise PosencError(f"{path}: this build of libposenc has no KV cache (rebuild it)")
        self.layer = Layer(settings, C)
        self.weights = PeWeights()
        self.keep = []
        names = [n for n, _, _ in self.layer.params()]
        tensors = dict(tensors or {})
        for name in tensors:
            if name not in names:
                raise PosencError(f"tensor '{name}': method {settings.get('method')} takes {names or 'no tensors'}")
        for i, (name, _, _) in enumerate(self.layer.params()):
            if name in tensors:
                a = _f32(name, tensors[name])
                self.keep.append(a)
                self.weights.param[i] = a.ctypes.data
                self.weights.param_rows[i] = a.shape[0] if a.ndim else 1
        # a required tensor left out: the library's call names it


def rotate(x, positions, settings, *, which="k", lo=None, hi=None, backward=False, tensors=None):
    """x (n, H, D) float32 rotated at positions (n) as the layer rotates q (which="q") or k
    ("k") in an attention over positions lo .. hi (default: the positions' own range);
    backward: the transpose (rotation by -theta). Returns a new array."""
    a = np.array(x, dtype=np.float32, order="C", copy=True)
    if a.ndim != 3:
        raise ValueError(f"x: expected (n, heads, head_dim), got shape {list(a.shape)}")
    n, H, D = a.shape
    p = _i64("positions", positions, n)
    lo = int(p.min()) if lo is None else int(lo)
    hi = int(p.max()) if hi is None else int(hi)
    eng = _Engine({**settings, "heads": H}, H * D, tensors)
    err = PeErr()
    check(lib.pe_attention_rotate(eng.layer.ptr, ctypes.byref(eng.weights), a.ctypes.data_as(_F), n, H * D, H,
                                  p.ctypes.data_as(_I), lo, hi, 0 if which == "q" else 1, int(bool(backward)),
                                  ctypes.byref(err)), err)
    return a


# pe_encode came after pe_attend: bound when this build of the library has it
HAS_ENCODE = hasattr(lib, "pe_encode")
if HAS_ENCODE:
    lib.pe_encode.restype = ctypes.c_int
    lib.pe_encode.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                              ctypes.POINTER(ctypes.c_char_p), ctypes.c_int64, ctypes.c_int,
                              ctypes.POINTER(PeTensor), ctypes.POINTER(ctypes.POINTER(PeTensor)),
                              ctypes.POINTER(ctypes.c_int), ctypes.POINTER(PeErr)]


def _dtypes():
    """pe_dtype code <-> numpy dtype, by the library's own dtype names."""
    by_name = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
               "I64": np.int64, "I8": np.int8, "U8": np.uint8, "I16": np.int16,
               "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}
    code_of, dtype_of = {}, {}
    for code in range(64):
        name = lib.pe_dtype_name(code).decode()
        if name == "?":
            break
        if name in by_name:
            code_of[np.dtype(by_name[name])] = code
            dtype_of[code] = np.dtype(by_name[name])
    return code_of, dtype_of


DTYPE_CODE, CODE_DTYPE = _dtypes()


def check(status, err):
    if status != 0:
        raise PosencError(err.msg.decode(errors="replace"), status)


_KEY_TYPES = {}


def key_type(name):
    """The kind of value of key `name` as the library says ("int", "list", ...), or None."""
    if not _KEY_TYPES:
        k = 0
        while lib.pe_config_key_name(k):
            _KEY_TYPES[lib.pe_config_key_name(k).decode()] = lib.pe_config_key_type(k).decode()
            k += 1
    return _KEY_TYPES.get(name)


def text(value, key=None):
    """A setting (of key `key`) as the library's text form: booleans true/false, numbers in full
    precision, a list or tuple of integers comma-separated for the list keys (window=(4095, 0),
    rope_sections=[16, 24, 24])."""
    if isinstance(value, (list, tuple)) and key is not None and key_type(str(key)) != "list":
        lists = ", ".join(n for n, t in _KEY_TYPES.items() if t == "list")
        raise TypeError(f"setting value {value!r} of key '{key}': a list is for the list keys ({lists})")
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                for v in value):
        return ",".join(str(int(v)) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"setting value {value!r}: expected str, bool, int, float or a list of ints")


def methods():
    out, m = [], 0
    while True:
        name = lib.pe_method_name(m).decode()
        if name == "?":
            return out
        out.append(name)
        m += 1


def method_info(name):
    """pe_method_describe as a dict: fused, gqa, projected, memory, multi_axis, token_ids, ..."""
    m, info, err = lib.pe_method_from_name(str(name).encode()), PeMethodInfo(), PeErr()
    if m < 0:
        raise PosencError(f"unknown method '{name}'")
    check(lib.pe_method_describe(m, ctypes.byref(info), ctypes.byref(err)), err)
    return {f: getattr(info, f) for f, _ in _PeMethodInfoFields._fields_ if f not in ("name", "reference", "family")}


class Config:
    """A pe_config filled from settings; raises PosencError on an unknown key or bad value."""

    def __init__(self, settings):
        self.buf = ctypes.create_string_buffer(lib.pe_config_size())
        lib.pe_config_init(self.buf)
        err = PeErr()
        items = list(settings.items())
        items.sort(key=lambda kv: kv[0] != "method")  # method first: keys checked against it
        for k, v in items:
            check(lib.pe_config_set(self.buf, str(k).encode(), text(v, k).encode(), ctypes.byref(err)),
                  err)


class Layer:
    """A pe_attention created from settings and a width C (validates everything the
    configuration alone determines); used to learn the method's tensors."""

    def __init__(self, settings, C):
        cfg = Config(settings)
        err = PeErr()
        self.ptr = _P()
        check(lib.pe_attention_init(ctypes.byref(self.ptr), cfg.buf, int(C), ctypes.byref(err)),
              err)

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.pe_attention_free(self.ptr)
            self.ptr = None

    def head_dim(self):
        return lib.pe_attention_head_dim(self.ptr)

    def has_memory(self):
        return bool(lib.pe_attention_has_memory(self.ptr))

    def params(self):
        specs = (PeParamSpec * _MAX_SPECS)()
        n = lib.pe_attention_params(self.ptr, specs)
        return [(s.name.decode(), tuple(s.shape[d] for d in range(s.ndim)), bool(s.optional))
                for s in specs[:n]]

    def inits(self):
        """{name: (kind, a, b)}: each tensor's reference initialisation (pe_init)."""
        specs = (PeParamSpec * _MAX_SPECS)()
        n = lib.pe_attention_params(self.ptr, specs)
        return {s.name.decode(): (INIT_KINDS[s.init.kind], s.init.a, s.init.b) for s in specs[:n]}


class Call:
    """One pe_attention for one forward and the backward of it: the layer keeps what its
    backward needs (saved activations), so nothing is recomputed, and calls never share one.
    Buffers are raw addresses of contiguous float32 (positions int64, masks uint8) that the
    caller keeps alive and shaped as include/posenc.h says; `weights` is a PeWeights."""

    def __init__(self, cfg, C, threads=0, saved=SAVED_COPIES):
        err = PeErr()
        self.ptr = _P()
        check(lib.pe_attention_init(ctypes.byref(self.ptr), cfg.buf, int(C), ctypes.byref(err)), err)
        lib.pe_attention_set_run_options(self.ptr, ctypes.byref(PeRunOptions(threads=int(threads), saved=int(saved))))

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.pe_attention_free(self.ptr)
            self.ptr = None

    def axes(self, weights):
        return int(lib.pe_attention_axes(self.ptr, ctypes.byref(weights)))

    def dropout(self, p, seed):
        err = PeErr()
        check(lib.pe_attention_set_dropout(self.ptr, float(p), int(seed) & (2 ** 64 - 1), ctypes.byref(err)), err)

    def forward(self, weights, x, mems, M, B, T, at, y, probs):
        err = PeErr()
        check(lib.pe_attention_layer_forward(self.ptr, ctypes.byref(weights), x, mems, M, B, T, ctypes.byref(at),
                                             y, None, probs, ctypes.byref(err)), err)

    def backward(self, weights, dy, dx, grads):
        err = PeErr()
        check(lib.pe_attention_backward(self.ptr, ctypes.byref(weights), dy, dx, ctypes.byref(grads),
                                        ctypes.byref(err)), err)

    def forward_qkv(self, weights, q, k, v, B, T, Tk, at, o, probs):
        err = PeErr()
        check(lib.pe_attention_forward_qkv(self.ptr, ctypes.byref(weights), q, k, v, B, T, Tk, ctypes.byref(at), o,
                                           None, probs, ctypes.byref(err)), err)

    def backward_qkv(self, weights, do, dq, dk, dv, grads):
        err = PeErr()
        check(lib.pe_attention_backward_qkv(self.ptr, ctypes.byref(weights), do, dq, dk, dv, ctypes.byref(grads),
                                            ctypes.byref(err)), err)


class _PeHfLayerInfoFields(ctypes.Structure):
    _fields_ = [("n_layers", ctypes.c_int64), ("head_dim", ctypes.c_int64), ("layer_type", ctypes.c_char * 40),
                ("window", ctypes.c_int64), ("chunked", ctypes.c_int), ("mla", ctypes.c_int),
                ("qk_norm", ctypes.c_int), ("family", ctypes.c_char * 32), ("gguf_arch", ctypes.c_char * 32)]


class PeHfLayerInfo(ctypes.Union):  # pe_hf_layer_info (include/posenc/models.h): fields in a fixed size
    _anonymous_ = ("f",)
    _fields_ = [("f", _PeHfLayerInfoFields), ("bytes_", ctypes.c_ubyte * 256)]


def hf_layer_settings(path, layer=0, assume=None):
    """The settings posenc reads for layer `layer` of a HuggingFace config.json at path
    (pe_config_from_hf), as text keys, and its pe_hf_layer_info as a dict. The LongRoPE factor
    tables are not keys: a caller loads short_factor / long_factor as tensors. assume: the family
    (a model_type of posenc's table) whose code reads a config of a model_type posenc does not know."""
    cfg = ctypes.create_string_buffer(lib.pe_config_size())
    lib.pe_config_init(cfg)
    info, err = PeHfLayerInfo(), PeErr()
    if assume is not None:
        check(lib.pe_config_set(cfg, b"hf_assume", str(assume).encode(), ctypes.byref(err)), err)
    check(lib.pe_config_from_hf(cfg, str(path).encode(), int(layer), ctypes.byref(info), ctypes.byref(err)), err)
    out, buf, k = {}, ctypes.create_string_buffer(1024), 0
    while True:
        name = lib.pe_config_key_name(k)
        if not name:
            break
        if lib.pe_config_is_set(cfg, name) and name not in (b"hf_config", b"hf_assume"):
            lib.pe_config_key_value(cfg, k, buf, len(buf))
            out[name.decode()] = buf.value.decode()
        k += 1
    return out, {"n_layers": info.n_layers, "head_dim": info.head_dim, "layer_type": info.layer_type.decode(),
                 "window": info.window, "chunked": bool(info.chunked), "mla": bool(info.mla),
                 "qk_norm": bool(info.qk_norm), "family": info.family.decode(), "gguf_arch": info.gguf_arch.decode()}


def _call(fn, settings, tensors, *extra):
    """fn(n_keys, keys, values, *extra, n_in, in, &outs, &n_outs, &err) (pe_attend,
    pe_encode): settings {key: text}, tensors {name: numpy array} -> {name: array}."""
    keys = [str(k).encode() for k in settings]
    vals = [text(v, k).encode() for k, v in settings.items()]
    n = len(tensors)
    arr = (PeTensor * max(n, 1))()
    keep = []
    for i, (name, a) in enumerate(tensors.items()):
        code = DTYPE_CODE.get(a.dtype)
        if code is None:
            raise TypeError(f"tensor '{name}': numpy dtype {a.dtype} has no safetensors "
                            "counterpart the library knows")
        if a.ndim > PE_MAX_DIMS:
            raise ValueError(f"tensor '{name}': {a.ndim} dimensions, posenc takes at most "
                             f"{PE_MAX_DIMS}")
        if len(name.encode()) >= 64:
            raise ValueError(f"tensor name '{name[:20]}...' is longer than 63 bytes")
        a = np.ascontiguousarray(a)
        keep.append(a)
        t = arr[i]
        t.name = name.encode()
        t.dtype = code
        t.ndim = a.ndim
        for d in range(a.ndim):
            t.shape[d] = a.shape[d]
        t.data = a.ctypes.data
    ckeys = (ctypes.c_char_p * max(len(keys), 1))(*keys)
    cvals = (ctypes.c_char_p * max(len(vals), 1))(*vals)
    outs = ctypes.POINTER(PeTensor)()
    n_outs = ctypes.c_int(0)
    err = PeErr()
    st = fn(len(keys), ckeys, cvals, *extra, n, arr, ctypes.byref(outs), ctypes.byref(n_outs),
            ctypes.byref(err))
    check(st, err)
    try:
        result = {}
        for i in range(n_outs.value):
            t = outs[i]
            shape = tuple(t.shape[d] for d in range(t.ndim))
            a = np.empty(shape, CODE_DTYPE[t.dtype])
            if a.nbytes:
                ctypes.memmove(a.ctypes.data, t.data, a.nbytes)
            result[t.name.decode()] = a
        return result
    finally:
        lib.pe_tensors_free(outs, n_outs.value)


def attend(settings, tensors):
    """pe_attend."""
    return _call(lib.pe_attend, settings, tensors)


def encode(settings, tensors, C=0):
    """pe_encode."""
    if not HAS_ENCODE:
        raise NotImplementedError(f"{path} has no pe_encode (an older build of the library)")
    return _call(lib.pe_encode, settings, tensors, int(C))
