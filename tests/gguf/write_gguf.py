"""A small GGUF writer for the tests (no download): a llama.cpp model file as ggml's docs/gguf.md
lays it out ("GGUF", version 3, tensor and key counts, typed key-value pairs, tensor entries, then
the data section at the next multiple of general.alignment, 32 when absent, each tensor's data at
an offset that is a multiple of it, as gguf.cpp gguf_init_from_reader checks). Used by
tests/cli/test_gguf.sh, the Python tests and the fuzz seeds.

    write_gguf.py OUT.gguf SPEC.json   SPEC: {"kv": {key: [type, value]}, "tensors": [tensor]}
types: u8 i8 u16 i16 u32 i32 f32 bool str u64 i64 f64, or [array, elemtype] for a list value.
A tensor is a name (a 1-D F32 tensor of 8 zeros) or {"name": name, "f32": [values]} (1-D F32).
"""
import json
import struct
import sys

TYPES = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"), "u32": (4, "<I"), "i32": (5, "<i"),
         "f32": (6, "<f"), "bool": (7, "<?"), "str": (8, None), "u64": (10, "<Q"), "i64": (11, "<q"),
         "f64": (12, "<d")}


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(kind, v):
    if kind == "str":
        return string(v)
    return struct.pack(TYPES[kind][1], v)


def pad(n, a):
    return (n + a - 1) // a * a


def header(kv, tensors=(), version=3):
    """The whole file: header, tensor entries and their data"""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, (kind, v) in kv.items():
        out += string(key)
        if isinstance(kind, list):  # ["array", elem]
            elem = kind[1]
            out += struct.pack("<IIQ", 9, TYPES[elem][0], len(v)) + b"".join(value(elem, x) for x in v)
        else:
            out += struct.pack("<I", TYPES[kind][0]) + value(kind, v)
    align = kv.get("general.alignment", ["u32", 32])[1]
    data = b""
    for t in tensors:  # 1-D F32 tensors, each at the next multiple of the alignment
        name, vals = (t, [0.0] * 8) if isinstance(t, str) else (t["name"], t["f32"])
        data += b"\0" * (pad(len(data), align) - len(data))
        out += string(name) + struct.pack("<IQIQ", 1, len(vals), 0, len(data))
        data += struct.pack("<%df" % len(vals), *vals)
    if tensors:
        out += b"\0" * (pad(len(out), align) - len(out)) + data
    return out


if __name__ == "__main__":
    spec = json.load(open(sys.argv[2]))
    with open(sys.argv[1], "wb") as f:
        f.write(header(spec["kv"], spec.get("tensors", []), spec.get("version", 3)))
