"""Write and read kvsim trace files (safetensors) from Python.

A kvsim trace is a safetensors file: an 8-byte little-endian u64 N, N bytes of JSON header, then the data
buffer. The header names each tensor with its dtype, shape and [begin, end) byte offsets into the buffer,
plus "__metadata__" whose "kvsim_trace" entry is a JSON string describing the model and what was stored
(docs/trace-format.md is the normative text; docs/capture.md shows how to make one).

Tensors (Ls = len(layers), Hks = len(kv_heads), Hqs = len(query_heads)):
    keys             [Ls, Hks, T, d]  post-RoPE                       F16 | BF16 | F32
    values           [Ls, Hks, T, d]  optional                        same dtype as keys
    queries          [Ls, Hqs, S, d]  post-RoPE                       same dtype as keys
    query_positions  [S]              strictly increasing, < T        I64
    token_ids        [T]              >= 0                            I32
    surprisal        [T]              optional, -log p(t | <t), [0]=0 F32
    entropy          [G]              optional, G = T - prompt_tokens F32 (nats)
    varentropy       [G]              optional, with entropy          F32

This module needs only the Python standard library. numpy arrays and torch tensors are accepted when
those libraries happen to be installed (found by duck typing, never imported here unless the caller
already passed such an object), and take fast paths that never loop over elements in Python.

    write_trace(path, meta, tensors, dtype="bf16")
    read_header(path) -> (tensor header dict, __metadata__ dict)
    read_meta(path) -> the parsed kvsim_trace metadata dict
    read_tensor(path, name) -> flat list of floats or ints
    sentence_starts_from_tokens(token_strings, punctuation=".!?") -> [0, ...]
    float_to_f16_bits(x), float_to_bf16_bits(x), f16_bits_to_float(h), bf16_bits_to_float(h)
"""

import array
import json
import math
import os
import struct
import sys
import tempfile

SCHEMA_VERSION = 1

# Limits matching the C++ reader (traces/format/trace.cpp); real models are far inside them.
MAX_LAYERS = 4096
MAX_HEADS = 4096
MAX_HEAD_DIM = 4096
MAX_TOKENS = 1 << 32

SOURCE_KINDS = ("synthetic", "huggingface", "gguf", "other")

# Storage dtype names accepted by write_trace -> safetensors dtype string.
_STORAGE = {
    "bf16": "BF16", "bfloat16": "BF16", "BF16": "BF16",
    "fp16": "F16", "f16": "F16", "float16": "F16", "half": "F16", "F16": "F16",
    "fp32": "F32", "f32": "F32", "float32": "F32", "float": "F32", "F32": "F32",
}
_ITEMSIZE = {"F16": 2, "BF16": 2, "F32": 4, "I32": 4, "I64": 8}
_FLOAT_TENSORS = ("keys", "values", "queries")
_STAT_TENSORS = ("surprisal", "entropy", "varentropy")
_KNOWN = _FLOAT_TENSORS + ("query_positions", "token_ids") + _STAT_TENSORS
_LITTLE = sys.byteorder == "little"


# --------------------------------------------------------------------------------------------------
# Scalar conversions (bit-exact with traces/format/half.hpp).

def _f32_bits(x):
    """The IEEE binary32 bit pattern of x after rounding it to float32 (overflow -> inf)."""
    a = array.array("f", [x])
    return struct.unpack("<I", a.tobytes() if _LITTLE else a.tobytes()[::-1])[0]


def _bf16_from_f32_bits(u):
    if (u & 0x7FFFFFFF) > 0x7F800000:  # NaN: keep it (quiet) NaN with its sign
        return (u >> 16) | 0x40
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFFFFFF  # round to nearest even
    return u >> 16


def float_to_bf16_bits(x):
    """bfloat16 bits of x: rounded to float32 first, then to nearest even; NaN preserved."""
    return _bf16_from_f32_bits(_f32_bits(x))


def bf16_bits_to_float(h):
    return struct.unpack("<f", struct.pack("<I", (h & 0xFFFF) << 16))[0]


def _f16_from_f32(f):
    """fp16 bits of a value already representable as float32; overflow -> inf (struct raises)."""
    try:
        return struct.unpack("<H", struct.pack("<e", f))[0]
    except OverflowError:
        return 0xFC00 if f < 0 else 0x7C00


def float_to_f16_bits(x):
    """IEEE binary16 bits of x: rounded to float32 first, then to nearest even; overflow -> inf."""
    return _f16_from_f32(struct.unpack("<f", struct.pack("<I", _f32_bits(x)))[0])


def f16_bits_to_float(h):
    return struct.unpack("<e", struct.pack("<H", h & 0xFFFF))[0]


# --------------------------------------------------------------------------------------------------
# Input normalization: every accepted tensor-like becomes a _Prepared (shape, dtype, nbytes, write).

class _Prepared:
    __slots__ = ("shape", "dtype", "nbytes", "_chunks")

    def __init__(self, shape, dtype, chunks):
        self.shape = list(shape)
        self.dtype = dtype
        self._chunks = chunks  # bytes-like objects (bytes, memoryview, numpy arrays exposing the buffer)
        self.nbytes = sum(memoryview(c).nbytes for c in chunks)

    def write(self, f):
        for c in self._chunks:
            f.write(memoryview(c).cast("B") if not isinstance(c, (bytes, bytearray)) else c)


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach")


def _is_numpy(x):
    return type(x).__module__.split(".")[0] == "numpy" and hasattr(x, "dtype") and hasattr(x, "tobytes")


def _flatten_nested(x, name):
    """Nested lists/tuples -> (shape, flat list). Raises ValueError on ragged input."""
    if not isinstance(x, (list, tuple)):
        return [], [x]
    shape = []
    level = x
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        if not level:
            break
        level = level[0]
    flat = []

    def rec(v, depth):
        if depth == len(shape):
            if isinstance(v, (list, tuple)):
                raise ValueError(f"{name}: ragged nested list (deeper than shape {shape})")
            flat.append(v)
            return
        if not isinstance(v, (list, tuple)) or len(v) != shape[depth]:
            raise ValueError(f"{name}: ragged nested list (expected {shape[depth]} entries at depth {depth})")
        for e in v:
            rec(e, depth + 1)

    rec(x, 0)
    return shape, flat


def _to_shape_and_values(x, name):
    """Generic slow path: (shape or None when unknown/flat, flat python list of numbers)."""
    if _is_torch(x):
        t = x.detach().cpu()
        return list(t.shape), t.reshape(-1).tolist()
    if _is_numpy(x):
        return list(x.shape), x.reshape(-1).tolist()
    if isinstance(x, array.array):
        return None, x.tolist()
    if isinstance(x, (bytes, bytearray)):
        raise ValueError(f"{name}: raw bytes are only accepted for keys/values/queries (already in the storage dtype)")
    if isinstance(x, memoryview):
        if x.format in ("B", "b", "c"):
            raise ValueError(f"{name}: a byte memoryview is only accepted for keys/values/queries")
        shape = list(x.shape)
        _, flat = _flatten_nested(x.tolist(), name)
        return shape, flat
    if isinstance(x, (list, tuple)):
        return _flatten_nested(x, name)
    if hasattr(x, "tolist") and hasattr(x, "shape"):  # other array libraries (jax, cupy...)
        shape = list(x.shape)
        _, flat = _flatten_nested(x.tolist(), name)
        return shape, flat
    raise ValueError(f"{name}: unsupported type {type(x).__name__}; pass a nested list, array.array, "
                     "bytes-like, numpy array or torch tensor")


def _check_shape(name, got, expected, count):
    """got: the input's shape, or None for flat inputs without shape (checked by element count)."""
    n = 1
    for s in expected:
        n *= s
    if got is None or (len(got) == 1 and len(expected) > 1):
        if count != n:
            raise ValueError(f"{name}: has {count} elements; shape {expected} needs {n}")
        return
    if list(got) != list(expected):
        raise ValueError(f"{name}: shape {list(got)} does not match the expected {expected}")


def _floats_to_bytes(flat, sdtype):
    """Pure-Python conversion of a flat list of numbers to little-endian storage bytes."""
    f32 = array.array("f", flat)  # rounds each double to float32 (overflow -> inf), as C++ float would
    if sdtype == "F32":
        if not _LITTLE:
            f32.byteswap()
        return f32.tobytes()
    if sdtype == "F16":
        try:
            return struct.pack(f"<{len(f32)}e", *f32)
        except OverflowError:
            return struct.pack(f"<{len(f32)}H", *[_f16_from_f32(v) for v in f32])
    # BF16: from the float32 bits.
    u32 = array.array("I" if array.array("I").itemsize == 4 else "L")
    if u32.itemsize != 4:
        raise RuntimeError("no 4-byte unsigned array type on this platform")
    u32.frombytes(f32.tobytes())
    out = array.array("H", [_bf16_from_f32_bits(u) for u in u32])
    if not _LITTLE:
        out.byteswap()
    return out.tobytes()


def _numpy_float(x, sdtype):
    """numpy array -> bytes-like chunk in the storage dtype without Python loops."""
    import numpy as np  # present: the caller passed a numpy array

    dname = str(x.dtype)
    if sdtype == "BF16":
        if dname == "bfloat16":  # ml_dtypes
            return np.ascontiguousarray(x).view(np.uint16).astype("<u2", copy=False)
        u = np.ascontiguousarray(x, dtype="<f4").view("<u4")
        nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype("<u2")
        if nan.any():
            r[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype("<u2")
        return r
    target = "<f2" if sdtype == "F16" else "<f4"
    if dname == "bfloat16":
        x = x.astype(np.float32)
    if sdtype == "F16" and x.dtype != np.float16:
        x = np.asarray(x, dtype=np.float32)  # round to float32 first, as the C++ and list paths do
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(x, dtype=target)


def _torch_float(x, sdtype):
    """torch tensor -> bytes-like chunk (a numpy view) in the storage dtype."""
    torch = sys.modules["torch"]
    want = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32}[sdtype]
    t = x.detach()
    if t.dtype != want:
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            t = t.to(torch.float32)  # round to float32 first (e.g. float64 input)
        t = t.to(want)
    t = t.cpu().contiguous()
    if sdtype == "F32":
        arr = t.numpy()
    else:
        arr = t.view(torch.int16).numpy()
    if not _LITTLE:
        arr = arr.byteswap()
    return arr


def _prepare_float(name, x, sdtype, expected):
    if _is_torch(x):
        _check_shape(name, list(x.shape), expected, x.numel())
        return _Prepared(expected, sdtype, [_torch_float(x, sdtype)])
    if _is_numpy(x):
        _check_shape(name, list(x.shape), expected, int(x.size))
        return _Prepared(expected, sdtype, [_numpy_float(x, sdtype)])
    if isinstance(x, (bytes, bytearray)) or (isinstance(x, memoryview) and x.format in ("B", "b", "c")):
        n = len(x) if not isinstance(x, memoryview) else x.nbytes
        count = 1
        for s in expected:
            count *= s
        if n != count * _ITEMSIZE[sdtype]:
            raise ValueError(f"{name}: {n} raw bytes; shape {expected} in {sdtype} needs {count * _ITEMSIZE[sdtype]}")
        return _Prepared(expected, sdtype, [bytes(x)])
    if isinstance(x, array.array) and x.typecode == "f" and sdtype == "F32" and _LITTLE:
        _check_shape(name, None, expected, len(x))
        return _Prepared(expected, sdtype, [x.tobytes()])
    shape, flat = _to_shape_and_values(x, name)
    _check_shape(name, shape, expected, len(flat))
    try:
        data = _floats_to_bytes(flat, sdtype)
    except TypeError as e:
        raise ValueError(f"{name}: values must be numbers ({e})") from None
    return _Prepared(expected, sdtype, [data])


def _as_number_list(name, x):
    shape, flat = _to_shape_and_values(x, name)
    if shape is not None and len(shape) != 1:
        raise ValueError(f"{name}: must be 1-D, got shape {shape}")
    return flat


def _as_int_list(name, x):
    flat = _as_number_list(name, x)
    out = []
    for i, v in enumerate(flat):
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise ValueError(f"{name}[{i}]: value {v!r} is not an integer")
        out.append(v)
    return out


def _as_float_list(name, x):
    flat = _as_number_list(name, x)
    out = []
    for i, v in enumerate(flat):
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}]: value {v!r} is not a number") from None
    return out


# --------------------------------------------------------------------------------------------------
# Metadata validation (mirrors validate_trace in traces/format/trace.cpp).

def _req_int(d, key, field):
    if key not in d:
        raise ValueError(f"{field}: missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{field}: value {v!r} must be an integer")
    return v


def _check_positive(v, hi, field):
    if v < 1 or v > hi:
        raise ValueError(f"{field}: value {v} is outside 1 .. {hi}")


def _check_index_list(v, bound, field, bound_name, non_empty=True):
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{field}: must be a list of integers, got {type(v).__name__}")
    if non_empty and not v:
        raise ValueError(f"{field}: is empty; at least one entry is required")
    for i, x in enumerate(v):
        f = f"{field}[{i}]"
        if isinstance(x, bool) or not isinstance(x, int):
            raise ValueError(f"{f}: value {x!r} must be an integer")
        if x < 0 or x >= bound:
            raise ValueError(f"{f}: value {x} is outside 0 .. {bound_name}-1 = {bound - 1}")
        if i > 0 and x <= v[i - 1]:
            raise ValueError(f"{f}: value {x} does not follow {v[i - 1]}; the list must be strictly increasing "
                             "(sorted, no duplicates)")


_META_KEYS = ("schema", "model", "layers", "kv_heads", "query_heads", "prompt_tokens", "sentence_starts", "source")
_MODEL_KEYS = ("name", "layers", "heads", "kv_heads", "head_dim", "rope_theta", "dtype")
_SOURCE_KEYS = ("kind", "model", "text", "command", "seed")


def _no_unknown(d, known, field):
    extra = sorted(set(d) - set(known))
    if extra:
        raise ValueError(f"{field}: unknown key(s) {extra}; known: {', '.join(known)} "
                         "(put anything else in write_trace's extra_metadata)")


def _normalize_meta(meta):
    if not isinstance(meta, dict):
        raise ValueError("meta: must be a dict (the kvsim_trace metadata)")
    _no_unknown(meta, _META_KEYS, "kvsim_trace")
    m = dict(meta)
    m.setdefault("schema", SCHEMA_VERSION)
    if m["schema"] != SCHEMA_VERSION:
        raise ValueError(f"kvsim_trace.schema: version {m['schema']!r} is not supported; this writer writes "
                         f"version {SCHEMA_VERSION}")
    mo = m.get("model")
    if not isinstance(mo, dict):
        raise ValueError("kvsim_trace.model: missing or not a dict")
    _no_unknown(mo, _MODEL_KEYS, "kvsim_trace.model")
    mo = dict(mo)
    mo.setdefault("name", "")
    mo.setdefault("dtype", "")
    for k in ("name", "dtype"):
        if not isinstance(mo[k], str):
            raise ValueError(f"kvsim_trace.model.{k}: must be a string")
    L = _req_int(mo, "layers", "kvsim_trace.model.layers")
    H = _req_int(mo, "heads", "kvsim_trace.model.heads")
    Hkv = _req_int(mo, "kv_heads", "kvsim_trace.model.kv_heads")
    d = _req_int(mo, "head_dim", "kvsim_trace.model.head_dim")
    _check_positive(L, MAX_LAYERS, "kvsim_trace.model.layers")
    _check_positive(H, MAX_HEADS, "kvsim_trace.model.heads")
    _check_positive(Hkv, MAX_HEADS, "kvsim_trace.model.kv_heads")
    _check_positive(d, MAX_HEAD_DIM, "kvsim_trace.model.head_dim")
    if H % Hkv != 0:
        raise ValueError(f"kvsim_trace.model.kv_heads: value {Hkv} does not divide heads = {H}")
    if d % 2 != 0:
        raise ValueError(f"kvsim_trace.model.head_dim: value {d} is odd; RoPE rotates pairs, so it must be even")
    theta = mo.get("rope_theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not (theta > 0) or not math.isfinite(theta):
        raise ValueError(f"kvsim_trace.model.rope_theta: value {theta!r} must be a finite number > 0")
    mo["rope_theta"] = float(theta)
    m["model"] = mo
    _check_index_list(m.get("layers"), L, "kvsim_trace.layers", "layers")
    _check_index_list(m.get("kv_heads"), Hkv, "kvsim_trace.kv_heads", "kv_heads")
    _check_index_list(m.get("query_heads"), H, "kvsim_trace.query_heads", "heads")
    group = H // Hkv
    kvset = set(m["kv_heads"])
    for i, q in enumerate(m["query_heads"]):
        if q // group not in kvset:
            raise ValueError(f"kvsim_trace.query_heads[{i}]: query head {q} reads KV head {q // group} "
                             f"(group size {group}), which kv_heads does not store")
    m["layers"] = list(m["layers"])
    m["kv_heads"] = list(m["kv_heads"])
    m["query_heads"] = list(m["query_heads"])
    _req_int(m, "prompt_tokens", "kvsim_trace.prompt_tokens")
    if not isinstance(m.get("sentence_starts"), (list, tuple)):
        raise ValueError("kvsim_trace.sentence_starts: missing or not a list")
    m["sentence_starts"] = list(m["sentence_starts"])
    src = m.get("source", {})
    if not isinstance(src, dict):
        raise ValueError("kvsim_trace.source: must be a dict")
    _no_unknown(src, _SOURCE_KEYS, "kvsim_trace.source")
    src = dict(src)
    src.setdefault("kind", "other")
    for k in ("model", "text", "command"):
        src.setdefault(k, "")
    src.setdefault("seed", -1)
    if src["kind"] not in SOURCE_KINDS:
        raise ValueError(f"kvsim_trace.source.kind: value {src['kind']!r} is not one of {', '.join(SOURCE_KINDS)}")
    for k in ("model", "text", "command"):
        if not isinstance(src[k], str):
            raise ValueError(f"kvsim_trace.source.{k}: must be a string")
    if isinstance(src["seed"], bool) or not isinstance(src["seed"], int):
        raise ValueError(f"kvsim_trace.source.seed: value {src['seed']!r} must be an integer (-1 when none)")
    m["source"] = src
    return m


def _validate_tokens(m, token_ids, query_positions, stats):
    T = len(token_ids)
    _check_positive(T, MAX_TOKENS, "token_ids (length)")
    P = m["prompt_tokens"]
    if P < 1 or P > T:
        raise ValueError(f"kvsim_trace.prompt_tokens: value {P} is outside 1 .. T = {T}")
    _check_index_list(m["sentence_starts"], T, "kvsim_trace.sentence_starts", "T")
    if m["sentence_starts"][0] != 0:
        raise ValueError(f"kvsim_trace.sentence_starts[0]: value {m['sentence_starts'][0]} must be 0 "
                         "(the first sentence starts the trace)")
    _check_index_list(query_positions, T, "query_positions", "T")
    for i, t in enumerate(token_ids):
        if t < 0 or t > 0x7FFFFFFF:
            raise ValueError(f"token_ids[{i}]: value {t} is outside 0 .. 2^31-1")
    G = T - P
    if "surprisal" in stats and len(stats["surprisal"]) != T:
        raise ValueError(f"surprisal: has {len(stats['surprisal'])} entries; it must have one per token, T = {T}")
    for name in ("entropy", "varentropy"):
        if name in stats and len(stats[name]) != G:
            raise ValueError(f"{name}: has {len(stats[name])} entries; it must have one per generated token, "
                             f"T - prompt_tokens = {G}")
    if ("entropy" in stats) != ("varentropy" in stats):
        missing = "varentropy" if "entropy" in stats else "entropy"
        raise ValueError(f"{missing}: missing; entropy and varentropy come together")
    for name, v in stats.items():
        for i, x in enumerate(v):
            if not math.isfinite(x):
                raise ValueError(f"{name}[{i}]: value is {x}; statistics must be finite")


# --------------------------------------------------------------------------------------------------
# Writing.

def _int_bytes(values, code):
    a = array.array(code, values)
    if not _LITTLE:
        a.byteswap()
    return a.tobytes()


def _i64_array():
    for code in ("q", "l"):
        if array.array(code).itemsize == 8:
            return code
    raise RuntimeError("no 8-byte integer array type")


def _i32_array():
    for code in ("i", "l"):
        if array.array(code).itemsize == 4:
            return code
    raise RuntimeError("no 4-byte integer array type")


def write_trace(path, meta, tensors, dtype="bf16", extra_metadata=None):
    """Validate and write a kvsim trace to `path` atomically.

    meta: the kvsim_trace metadata dict ("schema" defaults to 1; "source" fields default to "" / -1).
    tensors: {"keys", "queries", "query_positions", "token_ids"} required; "values", "surprisal",
      "entropy", "varentropy" optional. Each is a nested list, array.array (flat, C order), bytes-like
      (keys/values/queries only: raw little-endian data already in the storage dtype), numpy array or
      torch tensor.
    dtype: storage dtype of keys/values/queries: "bf16", "fp16" or "fp32".
    extra_metadata: optional {str: str} added to __metadata__ (the key "kvsim_trace" is reserved).
    Raises ValueError describing the first inconsistency found; nothing is written then.
    """
    if dtype not in _STORAGE:
        raise ValueError(f"dtype: {dtype!r} is not one of bf16, fp16, fp32")
    sdtype = _STORAGE[dtype]
    if not isinstance(tensors, dict):
        raise ValueError("tensors: must be a dict name -> tensor")
    unknown = sorted(set(tensors) - set(_KNOWN))
    if unknown:
        raise ValueError(f"tensors: unknown tensor name(s) {unknown}; known: {', '.join(_KNOWN)}")
    for req in ("keys", "queries", "query_positions", "token_ids"):
        if tensors.get(req) is None:
            raise ValueError(f"{req}: missing (required)")

    m = _normalize_meta(meta)
    token_ids = _as_int_list("token_ids", tensors["token_ids"])
    query_positions = _as_int_list("query_positions", tensors["query_positions"])
    stats = {n: _as_float_list(n, tensors[n]) for n in _STAT_TENSORS if tensors.get(n) is not None}
    _validate_tokens(m, token_ids, query_positions, stats)

    T, S = len(token_ids), len(query_positions)
    Ls, Hks, Hqs, d = len(m["layers"]), len(m["kv_heads"]), len(m["query_heads"]), m["model"]["head_dim"]
    prepared = {
        "keys": _prepare_float("keys", tensors["keys"], sdtype, [Ls, Hks, T, d]),
        "queries": _prepare_float("queries", tensors["queries"], sdtype, [Ls, Hqs, S, d]),
    }
    if tensors.get("values") is not None:
        prepared["values"] = _prepare_float("values", tensors["values"], sdtype, [Ls, Hks, T, d])
    prepared["query_positions"] = _Prepared([S], "I64", [_int_bytes(query_positions, _i64_array())])
    prepared["token_ids"] = _Prepared([T], "I32", [_int_bytes(token_ids, _i32_array())])
    for n, v in stats.items():
        prepared[n] = _Prepared([len(v)], "F32", [_floats_to_bytes(v, "F32")])

    for n, p in prepared.items():
        count = 1
        for s in p.shape:
            count *= s
        if p.nbytes != count * _ITEMSIZE[p.dtype]:  # internal consistency
            raise ValueError(f"{n}: {p.nbytes} bytes for shape {p.shape} in {p.dtype}")

    metadata = {}
    if extra_metadata:
        for k, v in extra_metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError("extra_metadata: keys and values must be strings")
            if k == "kvsim_trace":
                raise ValueError("extra_metadata: the key 'kvsim_trace' is reserved")
            metadata[k] = v
    metadata["kvsim_trace"] = json.dumps(m, ensure_ascii=True, allow_nan=False)

    # Widest elements first, so every tensor starts aligned to its element size (the buffer is 8-aligned).
    order = sorted(prepared, key=lambda n: (-_ITEMSIZE[prepared[n].dtype], _KNOWN.index(n)))
    header = {}
    offset = 0
    for n in order:
        p = prepared[n]
        header[n] = {"dtype": p.dtype, "shape": p.shape, "data_offsets": [offset, offset + p.nbytes]}
        offset += p.nbytes
    header["__metadata__"] = metadata
    hbytes = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for n in order:
                prepared[n].write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# --------------------------------------------------------------------------------------------------
# Reading (small helpers, mainly for tests and quick checks).

def _read_raw_header(f, path):
    head = f.read(8)
    if len(head) != 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", head)
    size = os.fstat(f.fileno()).st_size
    if n > size - 8 or n > 100 * 1024 * 1024:
        raise ValueError(f"{path}: header length {n} does not fit the file ({size} bytes)")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return header, 8 + n, size


def read_header(path):
    """(tensor header {name: {"dtype", "shape", "data_offsets"}}, __metadata__ {str: str})."""
    with open(path, "rb") as f:
        header, _, _ = _read_raw_header(f, path)
    metadata = header.pop("__metadata__", {}) or {}
    return header, metadata


def read_meta(path):
    """The parsed kvsim_trace metadata dict."""
    _, metadata = read_header(path)
    if "kvsim_trace" not in metadata:
        raise ValueError(f"{path}: __metadata__ has no kvsim_trace entry; not a kvsim trace")
    return json.loads(metadata["kvsim_trace"])


def read_tensor(path, name):
    """One tensor as a flat list (floats for F16/BF16/F32, ints for I32/I64), C order."""
    with open(path, "rb") as f:
        header, start, size = _read_raw_header(f, path)
        if name not in header or name == "__metadata__":
            raise ValueError(f"{path}: no tensor named {name!r}")
        e = header[name]
        dt = e["dtype"]
        if dt not in _ITEMSIZE:
            raise ValueError(f"{path}: {name} has unsupported dtype {dt}")
        b, end = e["data_offsets"]
        count = 1
        for s in e["shape"]:
            count *= s
        if end - b != count * _ITEMSIZE[dt] or start + end > size or b < 0:
            raise ValueError(f"{path}: {name} offsets {e['data_offsets']} do not fit shape {e['shape']} / file")
        f.seek(start + b)
        raw = f.read(end - b)
    if dt == "F16":
        return list(struct.unpack(f"<{count}e", raw))
    if dt == "BF16":
        hs = struct.unpack(f"<{count}H", raw)
        return list(struct.unpack(f"<{count}f", struct.pack(f"<{count}I", *[h << 16 for h in hs])))
    code = {"F32": "f", "I32": "i", "I64": "q"}[dt]
    return list(struct.unpack(f"<{count}{code}", raw))


# --------------------------------------------------------------------------------------------------
# Sentence boundaries from token text.

_CLOSERS = "\"')]}\u201d\u2019\u00bb"


def sentence_starts_from_tokens(token_strings, punctuation=".!?", newline=True):
    """Indices of the first token of each sentence: [0, ...], strictly increasing.

    token_strings: the decoded text of each token, with its leading whitespace (e.g. " The").
    A sentence ends at a token whose text, ignoring trailing whitespace and closing quotes/brackets,
    ends with a character in `punctuation`; the next sentence starts at the next token that carries
    text and begins with whitespace (so "3.14" or "e.g.x" do not split). With newline=True a line
    break also ends a sentence, whatever follows it.
    """
    starts = [0]
    pending = False  # a sentence ended; the next token with content starts the next one
    hard = False     # ... and it need not begin with whitespace (line break)
    for i, tok in enumerate(token_strings):
        tok = tok if isinstance(tok, str) else str(tok)
        content = tok.strip()
        if pending and i > 0:
            if not content:  # whitespace-only token: the break continues
                if newline and "\n" in tok:
                    hard = True
                continue
            if content.strip(_CLOSERS) == "" and not tok[:1].isspace():
                pass  # a closing quote after the full stop: still the same sentence's end
            elif tok[:1].isspace() or hard:
                if i > starts[-1]:
                    starts.append(i)
                pending = hard = False
            else:
                pending = hard = False  # "3.14": no boundary
        if newline and "\n" in tok:
            after = tok.rsplit("\n", 1)[1]
            if after.strip():  # "\nThe": this token starts a sentence
                if i > starts[-1]:
                    starts.append(i)
                pending = hard = False
                content = after.strip()
            else:
                pending = hard = True
                continue
        if content and content.rstrip(_CLOSERS)[-1:] in punctuation and content.rstrip(_CLOSERS):
            pending = True
    return starts
