#!/usr/bin/env python3
"""Self-contained test of tools/capture/kvsim_trace.py (standard library only).

    python3 tools/capture/test_kvsim_trace.py OUTDIR

Writes OUTDIR/py_{fp32,fp16,bf16}.safetensors (a small valid trace in each storage dtype) and
OUTDIR/py_expected.json (values the C++ reader must read back from them), checks the header layout,
fp16/bf16 bit patterns and that invalid inputs raise ValueError. Prints one line "N passed, M failed"
last and exits 1 when anything failed. The files are left behind for the C++ cross-check.
"""

import array
import json
import math
import os
import random
import struct
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvsim_trace as kt  # noqa: E402

# The small trace: 2 of 3 layers, 4 heads / 2 KV heads (GQA group 2), d = 8, T = 40, P = 32, S = 12.
L_MODEL, H, HKV, D = 3, 4, 2, 8
LAYERS, KV_HEADS, QUERY_HEADS = [0, 2], [0, 1], [0, 1, 2, 3]
T, P = 40, 32
QPOS = list(range(P - 4, T))  # the last 4 prompt positions + all 8 generated: S = 12
S = len(QPOS)
# Row 0 of layer slot 0, head slot 0 holds values whose rounding differs per dtype.
SPECIAL_ROW = [1.0, -2.5, 0.1, 65504.0, 6e-8, 3.14159, -0.0, 1e-3]
DTYPES = ("fp32", "fp16", "bf16")

_results = []


def check(name, cond, detail=""):
    _results.append((name, bool(cond), detail))
    if not cond:
        print(f"FAIL {name} {detail}", file=sys.stderr)


def expect_value_error(name, fn, must_contain=None):
    try:
        fn()
    except ValueError as e:
        ok = must_contain is None or must_contain in str(e)
        check(name, ok, f"message {str(e)!r} lacks {must_contain!r}" if not ok else "")
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, f"raised {type(e).__name__}: {e}, not ValueError")
        return
    check(name, False, "no ValueError raised")


def make_meta(**over):
    m = {
        "schema": 1,
        "model": {"name": "tiny-test", "layers": L_MODEL, "heads": H, "kv_heads": HKV, "head_dim": D,
                  "rope_theta": 10000.0, "dtype": "bf16"},
        "layers": list(LAYERS),
        "kv_heads": list(KV_HEADS),
        "query_heads": list(QUERY_HEADS),
        "prompt_tokens": P,
        "sentence_starts": [0, 7, 15, 26, 33],
        "source": {"kind": "other", "model": "tiny-test", "text": "random (test_kvsim_trace.py)",
                   "command": "python3 tools/capture/test_kvsim_trace.py", "seed": 1234},
    }
    m.update(over)
    return m


def make_tensors():
    rng = random.Random(1234)

    def block(n_heads, n_rows):
        return [[[[rng.gauss(0.0, 1.5) for _ in range(D)] for _ in range(n_rows)] for _ in range(n_heads)]
                for _ in range(len(LAYERS))]

    keys = block(len(KV_HEADS), T)
    keys[0][0][0] = list(SPECIAL_ROW)
    values = block(len(KV_HEADS), T)
    queries = block(len(QUERY_HEADS), S)
    token_ids = [rng.randrange(0, 50000) for _ in range(T)]
    surprisal = [0.0] + [rng.uniform(0.0, 12.0) for _ in range(T - 1)]
    entropy = [rng.uniform(0.0, 5.0) for _ in range(T - P)]
    varentropy = [rng.uniform(0.0, 9.0) for _ in range(T - P)]
    return {"keys": keys, "values": values, "queries": queries, "query_positions": list(QPOS),
            "token_ids": token_ids, "surprisal": surprisal, "entropy": entropy, "varentropy": varentropy}


def rounded(x, dtype):
    if dtype == "fp32":
        return struct.unpack("<f", struct.pack("<f", x))[0]
    if dtype == "fp16":
        return kt.f16_bits_to_float(kt.float_to_f16_bits(x))
    return kt.bf16_bits_to_float(kt.float_to_bf16_bits(x))


def flat(nested):
    out = []

    def rec(v):
        if isinstance(v, list):
            for e in v:
                rec(e)
        else:
            out.append(v)

    rec(nested)
    return out


def same_float(a, b):
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


# ------------------------------------------------------------------------------------------------

def test_bit_patterns():
    f16, bf16 = kt.float_to_f16_bits, kt.float_to_bf16_bits
    inf, nan = float("inf"), float("nan")
    cases16 = [
        (1.0, 0x3C00), (-2.0, 0xC000), (0.0, 0x0000), (-0.0, 0x8000), (65504.0, 0x7BFF),
        (65519.0, 0x7BFF),          # rounds down to the largest finite
        (65520.0, 0x7C00),          # the tie rounds to even: infinity
        (1e6, 0x7C00), (-1e6, 0xFC00), (inf, 0x7C00), (-inf, 0xFC00),
        (2.0 ** -14, 0x0400),       # smallest normal
        (2.0 ** -24, 0x0001),       # smallest subnormal
        (2.0 ** -25, 0x0000),       # half of it: tie to even (0)
        (3 * 2.0 ** -25, 0x0002),   # 1.5 ulp: tie to even (2)
        (1023 * 2.0 ** -24, 0x03FF),  # largest subnormal
        (1.0 + 2.0 ** -11, 0x3C00),   # tie between 0x3C00 and 0x3C01: even
        (1.0 + 3 * 2.0 ** -11, 0x3C02),  # tie between 0x3C01 and 0x3C02: even
        (0.1, 0x2E66), (1.0 / 3.0, 0x3555),
    ]
    for x, want in cases16:
        got = f16(x)
        check(f"f16({x!r})", got == want, f"got 0x{got:04X}, want 0x{want:04X}")
    check("f16(nan) is nan", (f16(nan) & 0x7C00) == 0x7C00 and (f16(nan) & 0x3FF) != 0, hex(f16(nan)))
    cases_bf = [
        (1.0, 0x3F80), (-1.0, 0xBF80), (0.0, 0x0000), (-0.0, 0x8000), (inf, 0x7F80), (-inf, 0xFF80),
        (65504.0, 0x4780),                    # 65504 is not representable: rounds to 65536
        (1.0 + 2.0 ** -8, 0x3F80),            # tie: even (down)
        (1.0 + 3 * 2.0 ** -8, 0x3F82),        # tie: even (up)
        (1.0 + 2.0 ** -8 + 2.0 ** -20, 0x3F81),  # just above the tie: up
        (3.4e38, 0x7F80),                     # rounds up past the largest finite bf16
        (1e-40, 0x0001),                      # float32 subnormal 0x000116C2 -> bf16 subnormal 0x0001
        (0.1, 0x3DCD), (3.14159, 0x4049),
    ]
    for x, want in cases_bf:
        got = bf16(x)
        check(f"bf16({x!r})", got == want, f"got 0x{got:04X}, want 0x{want:04X}")
    nb = bf16(nan)
    check("bf16(nan) is quiet nan", (nb & 0x7F80) == 0x7F80 and (nb & 0x7F) != 0 or (nb & 0x40) != 0, hex(nb))
    # A signalling NaN payload that would round to infinity stays NaN.
    snan = struct.unpack("<f", struct.pack("<I", 0x7F800001))[0]
    check("bf16(snan) stays nan", math.isnan(kt.bf16_bits_to_float(bf16(snan))), hex(bf16(snan)))
    check("bf16(-nan) keeps sign", bf16(-nan) >> 15 == 1, hex(bf16(-nan)))
    # Back to float.
    check("f16 0x3C00 -> 1.0", kt.f16_bits_to_float(0x3C00) == 1.0)
    check("f16 0x0001 -> 2^-24", kt.f16_bits_to_float(0x0001) == 2.0 ** -24)
    check("f16 0x7BFF -> 65504", kt.f16_bits_to_float(0x7BFF) == 65504.0)
    check("bf16 0x3F80 -> 1.0", kt.bf16_bits_to_float(0x3F80) == 1.0)
    check("bf16 0x4049 -> 3.140625", kt.bf16_bits_to_float(0x4049) == 3.140625)
    # Bulk conversion equals the scalar one (the list fast path uses struct 'e' / array).
    xs = [1.0, 65520.0, -1e9, 2.0 ** -25, 0.1, nan, -inf, 1e-40]
    raw16 = kt._floats_to_bytes(xs, "F16")
    check("bulk f16 == scalar", list(struct.unpack(f"<{len(xs)}H", raw16)) == [f16(x) for x in xs])
    rawbf = kt._floats_to_bytes(xs, "BF16")
    check("bulk bf16 == scalar", list(struct.unpack(f"<{len(xs)}H", rawbf)) == [bf16(x) for x in xs])


def check_file_layout(path, dtype):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    check(f"{dtype}: data starts 8-aligned", (8 + n) % 8 == 0, str(n))
    hdr = json.loads(blob[8:8 + n].decode("ascii"))
    check(f"{dtype}: header is ASCII JSON padded with spaces", blob[8:8 + n].rstrip(b" ").endswith(b"}"))
    meta = hdr.pop("__metadata__")
    check(f"{dtype}: metadata values are strings", all(isinstance(v, str) for v in meta.values()))
    spans = sorted(tuple(e["data_offsets"]) for e in hdr.values())
    contiguous = spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    check(f"{dtype}: tensors cover the buffer without gaps", contiguous and spans[-1][1] == len(blob) - 8 - n,
          str(spans))
    for name, e in hdr.items():
        size = kt._ITEMSIZE[e["dtype"]]
        check(f"{dtype}: {name} aligned to its element size", e["data_offsets"][0] % size == 0)
    return hdr, meta


def test_write_and_read(outdir):
    tensors = make_tensors()
    meta = make_meta()
    want_dtype = {"fp32": "F32", "fp16": "F16", "bf16": "BF16"}
    expected = {"files": {}, "tokens": T, "prompt_tokens": P, "steps": S, "head_dim": D,
                "layers": LAYERS, "kv_heads": KV_HEADS, "query_heads": QUERY_HEADS,
                "token_ids": tensors["token_ids"], "query_positions": QPOS,
                "sentence_starts": meta["sentence_starts"],
                "surprisal": [rounded(x, "fp32") for x in tensors["surprisal"]],
                "entropy": [rounded(x, "fp32") for x in tensors["entropy"]],
                "varentropy": [rounded(x, "fp32") for x in tensors["varentropy"]]}
    for dtype in DTYPES:
        path = os.path.join(outdir, f"py_{dtype}.safetensors")
        kt.write_trace(path, meta, tensors, dtype=dtype)
        check(f"{dtype}: file exists", os.path.exists(path))
        hdr, raw_meta = check_file_layout(path, dtype)
        header, metadata = kt.read_header(path)
        check(f"{dtype}: read_header agrees", header == hdr and metadata == raw_meta)
        check(f"{dtype}: tensor set", set(header) == set(tensors), str(sorted(header)))
        check(f"{dtype}: keys shape", header["keys"]["shape"] == [2, 2, T, D], str(header["keys"]["shape"]))
        check(f"{dtype}: values shape", header["values"]["shape"] == [2, 2, T, D])
        check(f"{dtype}: queries shape", header["queries"]["shape"] == [2, 4, S, D])
        for n in ("keys", "values", "queries"):
            check(f"{dtype}: {n} dtype", header[n]["dtype"] == want_dtype[dtype], header[n]["dtype"])
        check(f"{dtype}: query_positions I64", header["query_positions"]["dtype"] == "I64")
        check(f"{dtype}: token_ids I32", header["token_ids"]["dtype"] == "I32")
        check(f"{dtype}: surprisal F32", header["surprisal"]["dtype"] == "F32")
        m = kt.read_meta(path)
        check(f"{dtype}: kvsim_trace round-trips", m == json.loads(json.dumps(meta)), json.dumps(m))
        check(f"{dtype}: source.kind", m["source"]["kind"] == "other")
        for n in ("keys", "values", "queries"):
            got = kt.read_tensor(path, n)
            want = [rounded(x, dtype) for x in flat(tensors[n])]
            check(f"{dtype}: {n} values", len(got) == len(want) and all(same_float(a, b) for a, b in zip(got, want)))
        check(f"{dtype}: token_ids", kt.read_tensor(path, "token_ids") == tensors["token_ids"])
        check(f"{dtype}: query_positions", kt.read_tensor(path, "query_positions") == QPOS)
        check(f"{dtype}: surprisal", kt.read_tensor(path, "surprisal") == expected["surprisal"])
        check(f"{dtype}: entropy", kt.read_tensor(path, "entropy") == expected["entropy"])
        keys = kt.read_tensor(path, "keys")
        values = kt.read_tensor(path, "values")
        queries = kt.read_tensor(path, "queries")
        # [l][h][t][i] -> ((l * H + h) * T + t) * D + i
        kv_row = lambda data, l, h, t: data[((l * 2 + h) * T + t) * D:((l * 2 + h) * T + t + 1) * D]  # noqa: E731
        q_row = lambda l, h, s: queries[((l * 4 + h) * S + s) * D:((l * 4 + h) * S + s + 1) * D]  # noqa: E731
        expected["files"][f"py_{dtype}.safetensors"] = {
            "dtype": want_dtype[dtype],
            "keys_l0_h0_t0": kv_row(keys, 0, 0, 0),
            "keys_l1_h1_t39": kv_row(keys, 1, 1, T - 1),
            "values_l1_h0_t5": kv_row(values, 1, 0, 5),
            "queries_l0_h3_s11": q_row(0, 3, S - 1),
            "queries_l1_h0_s0": q_row(1, 0, 0),
        }
    # Specific rounding of the special row, per dtype.
    special = expected["files"]["py_fp16.safetensors"]["keys_l0_h0_t0"]
    check("fp16 special row", special[3] == 65504.0 and special[4] == 2.0 ** -24 * 1 and special[0] == 1.0,
          str(special))
    special = expected["files"]["py_bf16.safetensors"]["keys_l0_h0_t0"]
    check("bf16 special row", special[3] == 65536.0 and special[5] == 3.140625, str(special))
    with open(os.path.join(outdir, "py_expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


def test_input_kinds(outdir):
    """array.array, bytes, memoryview and flat inputs give the same file as nested lists."""
    tensors = make_tensors()
    meta = make_meta()
    ref = os.path.join(outdir, "tmp_ref.safetensors")
    kt.write_trace(ref, meta, tensors, dtype="fp16")
    with open(ref, "rb") as f:
        ref_bytes = f.read()
    alt = dict(tensors)
    alt["keys"] = array.array("f", flat(tensors["keys"]))
    alt["values"] = array.array("d", flat(tensors["values"]))
    alt["queries"] = kt._floats_to_bytes(flat(tensors["queries"]), "F16")  # raw storage bytes
    alt["token_ids"] = array.array("i", tensors["token_ids"])
    alt["query_positions"] = tuple(QPOS)
    alt["surprisal"] = memoryview(array.array("f", tensors["surprisal"]))
    other = os.path.join(outdir, "tmp_alt.safetensors")
    kt.write_trace(other, meta, alt, dtype="fp16")
    with open(other, "rb") as f:
        check("array/bytes/memoryview inputs give identical file", f.read() == ref_bytes)
    # Optional tensors can be left out.
    minimal = {k: tensors[k] for k in ("keys", "queries", "query_positions", "token_ids")}
    kt.write_trace(other, meta, minimal, dtype="bf16")
    header, _ = kt.read_header(other)
    check("minimal trace has 4 tensors", set(header) == set(minimal), str(sorted(header)))
    os.unlink(ref)
    os.unlink(other)


def test_invalid(outdir):
    tensors = make_tensors()
    path = os.path.join(outdir, "tmp_invalid.safetensors")
    w = lambda meta=None, **over: kt.write_trace(path, meta or make_meta(), dict(tensors, **over))  # noqa: E731

    expect_value_error("query head outside stored kv groups",
                       lambda: w(make_meta(kv_heads=[0], query_heads=[0, 1, 2, 3])), "kv_heads does not store")
    expect_value_error("unsorted layers", lambda: w(make_meta(layers=[2, 0])), "strictly increasing")
    expect_value_error("duplicate kv_heads", lambda: w(make_meta(kv_heads=[0, 0])), "strictly increasing")
    expect_value_error("layer out of range", lambda: w(make_meta(layers=[0, 3])), "outside")
    expect_value_error("empty query_heads", lambda: w(make_meta(query_heads=[])), "empty")
    expect_value_error("heads not divisible", lambda: w(make_meta(model=dict(make_meta()["model"], kv_heads=3))),
                       "does not divide")
    expect_value_error("odd head_dim", lambda: w(make_meta(model=dict(make_meta()["model"], head_dim=7))), "odd")
    expect_value_error("bad rope_theta", lambda: w(make_meta(model=dict(make_meta()["model"], rope_theta=0))),
                       "rope_theta")
    expect_value_error("wrong schema", lambda: w(make_meta(schema=2)), "schema")
    expect_value_error("bad source kind", lambda: w(make_meta(source={"kind": "pytorch"})), "source.kind")
    bad_keys = [[[row[:-1] for row in head] for head in layer] for layer in tensors["keys"]]
    expect_value_error("wrong key shape (d)", lambda: w(keys=bad_keys), "keys: shape")
    expect_value_error("wrong key shape (T)", lambda: w(keys=[[h[:-1] for h in layer] for layer in tensors["keys"]]),
                       "keys: shape")
    expect_value_error("ragged keys", lambda: w(keys=[tensors["keys"][0], bad_keys[1]]), "ragged")
    expect_value_error("values shape", lambda: w(values=tensors["keys"][:1]), "values: shape")
    expect_value_error("S mismatch (queries vs query_positions)", lambda: w(query_positions=QPOS[:-1]),
                       "queries: shape")
    expect_value_error("flat array wrong count", lambda: w(keys=array.array("f", [0.0] * 10)), "elements")
    expect_value_error("raw bytes wrong length", lambda: w(queries=b"\0" * 10), "raw bytes")
    expect_value_error("query_positions not increasing", lambda: w(query_positions=QPOS[:5] + [QPOS[3]] + QPOS[6:]),
                       "strictly increasing")
    expect_value_error("query position >= T", lambda: w(query_positions=QPOS[1:] + [T]), "outside")
    expect_value_error("prompt_tokens > T", lambda: w(make_meta(prompt_tokens=T + 1)), "prompt_tokens")
    expect_value_error("prompt_tokens 0", lambda: w(make_meta(prompt_tokens=0)), "prompt_tokens")
    expect_value_error("sentence_starts not from 0", lambda: w(make_meta(sentence_starts=[1, 5])), "must be 0")
    expect_value_error("sentence_starts beyond T", lambda: w(make_meta(sentence_starts=[0, T])), "outside")
    expect_value_error("negative token id", lambda: w(token_ids=[-1] + tensors["token_ids"][1:]), "token_ids[0]")
    expect_value_error("surprisal length", lambda: w(surprisal=tensors["surprisal"][:-1]), "one per token")
    expect_value_error("entropy length", lambda: w(entropy=tensors["entropy"] + [1.0]), "one per generated")
    expect_value_error("entropy without varentropy", lambda: w(varentropy=None), "come together")
    expect_value_error("non-finite entropy", lambda: w(entropy=[float("nan")] + tensors["entropy"][1:]), "finite")
    expect_value_error("unknown metadata key", lambda: w(make_meta(prompt_token=3)), "unknown key")
    expect_value_error("unknown model key", lambda: w(make_meta(model=dict(make_meta()["model"], layer=3))),
                       "kvsim_trace.model: unknown key")
    expect_value_error("unknown tensor", lambda: w(attention=[1.0]), "unknown tensor")
    expect_value_error("missing keys", lambda: w(keys=None), "keys: missing")
    expect_value_error("bad dtype", lambda: kt.write_trace(path, make_meta(), tensors, dtype="int8"), "dtype")
    expect_value_error("float token id", lambda: w(token_ids=[0.5] + tensors["token_ids"][1:]), "not an integer")
    check("failed writes leave nothing behind", not [n for n in os.listdir(outdir) if n.startswith(".tmp_invalid")
                                                     or n == "tmp_invalid.safetensors"], str(os.listdir(outdir)))


def test_sentence_starts():
    toks = ["The", " cat", " sat", ".", " It", " was", " 3", ".", "14", " m", " long", "!", "\"", " Then",
            "\n\n", "Next", " line", "?", " End"]
    got = kt.sentence_starts_from_tokens(toks)
    check("sentence starts", got == [0, 4, 13, 15, 18], str(got))
    check("sentence starts: no punctuation", kt.sentence_starts_from_tokens(["a", " b", " c"]) == [0])
    check("sentence starts: leading newline", kt.sentence_starts_from_tokens(["a", ".", "\nB", " c"]) == [0, 2])
    check("sentence starts: empty", kt.sentence_starts_from_tokens([]) == [0])


def test_numpy_if_present(outdir):
    try:
        import numpy as np  # noqa: F401
    except ImportError:
        return  # CI has no numpy; the fast path is tested where it is installed
    tensors = make_tensors()
    for dtype in DTYPES:
        ref = os.path.join(outdir, "tmp_np_ref.safetensors")
        kt.write_trace(ref, make_meta(), tensors, dtype=dtype)
        alt = dict(tensors)
        for n in ("keys", "values", "queries"):
            alt[n] = np.array(tensors[n], dtype=np.float64)
        alt["token_ids"] = np.array(tensors["token_ids"], dtype=np.int64)
        other = os.path.join(outdir, "tmp_np_alt.safetensors")
        kt.write_trace(other, make_meta(), alt, dtype=dtype)
        with open(ref, "rb") as a, open(other, "rb") as b:
            check(f"numpy input identical ({dtype})", a.read() == b.read())
        os.unlink(ref)
        os.unlink(other)


def test_torch_if_present(outdir):
    try:
        import torch
    except ImportError:
        return  # CI has no torch
    tensors = make_tensors()
    for dtype in DTYPES:
        ref = os.path.join(outdir, "tmp_t_ref.safetensors")
        kt.write_trace(ref, make_meta(), tensors, dtype=dtype)
        for src in (torch.float64, torch.float32):
            alt = dict(tensors)
            for n in ("keys", "values", "queries"):
                alt[n] = torch.tensor(tensors[n], dtype=src)
            alt["token_ids"] = torch.tensor(tensors["token_ids"], dtype=torch.int32)
            alt["query_positions"] = torch.tensor(QPOS)
            alt["surprisal"] = torch.tensor(tensors["surprisal"])
            other = os.path.join(outdir, "tmp_t_alt.safetensors")
            kt.write_trace(other, make_meta(), alt, dtype=dtype)
            with open(ref, "rb") as a, open(other, "rb") as b:
                check(f"torch {src} input identical ({dtype})", a.read() == b.read())
            os.unlink(other)
        os.unlink(ref)
    # A tensor already in the storage dtype, and a non-contiguous one.
    k = torch.tensor(tensors["keys"], dtype=torch.float32)
    t = dict(tensors, keys=k.to(torch.bfloat16))
    p1 = os.path.join(outdir, "tmp_t1.safetensors")
    kt.write_trace(p1, make_meta(), t, dtype="bf16")
    got = kt.read_tensor(p1, "keys")
    check("torch bf16 tensor stored as is", got == k.to(torch.bfloat16).float().reshape(-1).tolist())
    t = dict(tensors, keys=k.transpose(2, 3).contiguous().transpose(2, 3))
    kt.write_trace(p1, make_meta(), t, dtype="fp32")
    check("torch non-contiguous tensor", kt.read_tensor(p1, "keys") == k.reshape(-1).tolist())
    os.unlink(p1)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    tests = [test_bit_patterns, lambda: test_write_and_read(outdir), lambda: test_input_kinds(outdir),
             lambda: test_invalid(outdir), test_sentence_starts, lambda: test_numpy_if_present(outdir),
             lambda: test_torch_if_present(outdir)]
    for t in tests:
        try:
            t()
        except Exception:  # noqa: BLE001
            check(getattr(t, "__name__", "test"), False, traceback.format_exc())
    failed = sum(1 for _, ok, _ in _results if not ok)
    print(f"{len(_results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
