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
# Room for pe_config and pe_param_spec arrays, generous so that fields and methods added to
# the library later never overrun what Python allocates.
_CONFIG_BYTES = 1 << 16
_MAX_SPECS = 64

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
                ("shape", ctypes.c_int64 * PE_MAX_DIMS), ("optional", ctypes.c_int), ("init", PeInit)]


# pe_init kinds (include/posenc.h): how a method's reference initialises a tensor
INIT_KINDS = {1: "normal", 2: "uniform", 3: "const", 4: "xavier", 5: "linear", 6: "alibi_slopes",
              7: "complex_freq"}


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
    "pe_config_init": (None, [_P]),
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


def text(value):
    """A setting as the library's text form: booleans true/false, numbers in full precision."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, str):
        return value
    raise TypeError(f"setting value {value!r}: expected str, bool, int or float")


def methods():
    out, m = [], 0
    while True:
        name = lib.pe_method_name(m).decode()
        if name == "?":
            return out
        out.append(name)
        m += 1


class Config:
    """A pe_config filled from settings; raises PosencError on an unknown key or bad value."""

    def __init__(self, settings):
        self.buf = ctypes.create_string_buffer(_CONFIG_BYTES)
        lib.pe_config_init(self.buf)
        err = PeErr()
        items = list(settings.items())
        items.sort(key=lambda kv: kv[0] != "method")  # method first: keys checked against it
        for k, v in items:
            check(lib.pe_config_set(self.buf, str(k).encode(), text(v).encode(), ctypes.byref(err)),
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


def _call(fn, settings, tensors, *extra):
    """fn(n_keys, keys, values, *extra, n_in, in, &outs, &n_outs, &err) (pe_attend,
    pe_encode): settings {key: text}, tensors {name: numpy array} -> {name: array}."""
    keys = [str(k).encode() for k in settings]
    vals = [text(v).encode() for v in settings.values()]
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
