#!/usr/bin/env python3
"""Capture a kvsim trace from a Hugging Face causal LM (transformers + torch; best on a GPU box).

    python3 tools/capture/hf_capture.py --model Qwen/Qwen2.5-0.5B-Instruct --text book.txt \\
        --max-prompt-tokens 8192 --gen 256 --layers 0,12,23 -o qwen-8k.safetensors

Runs a prefill over the prompt (in chunks) and then greedy decoding one token at a time with the KV
cache, recording for each selected layer the post-RoPE keys, the values and the post-RoPE queries
(for the last --obs-window prompt positions and every decode step), plus per-token surprisal and,
for generated tokens, the entropy / varentropy of the distribution each was drawn from. The result
is written with kvsim_trace.py (see docs/capture.md).

How q/k/v are recorded. A forward *pre*-hook (with kwargs) on each selected layer's attention module
receives the exact inputs of that module: the normed hidden states and, in recent transformers
(>= 4.48, and 5.x), `position_embeddings = (cos, sin)`. The hook recomputes q, k, v with the module's
own q_proj / k_proj / v_proj (biases included, e.g. Qwen2), its q_norm / k_norm when it has them
(Qwen3), and rotates q and k with the `apply_rotary_pos_emb` of the module's own modeling file.
We chose this over patching `apply_rotary_pos_emb` in the modeling module because
  * it does not depend on which attention kernel runs (eager / sdpa / flash) nor on the call order
    inside forward, and it sees v, which apply_rotary_pos_emb never does;
  * a patched global cannot tell which layer called it without extra bookkeeping, and several
    model files import the function under other names;
  * GQA comes for free: k_proj / v_proj produce kv_heads heads, q_proj produces heads heads.
The price is re-running three projections per selected layer (a few % of the model's FLOPs). After the
prefill the recorded keys are compared with the keys the model put in its own KV cache, so a model
whose attention does something this recomputation misses is reported (a warning, or an error with
--strict) rather than silently producing a wrong trace.

torch and transformers are imported only after the arguments are parsed, so --help works without them.
"""

import argparse
import inspect
import json
import math
import os
import re
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvsim_trace  # noqa: E402  (standard library only)

_T0 = time.time()


def log(msg):
    print(f"[hf_capture {time.time() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def human(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def die(msg, code=2):
    print(f"hf_capture: error: {msg}", file=sys.stderr)
    sys.exit(code)


# --------------------------------------------------------------------------------------------------
# Arguments.

def parse_index_list(spec, bound, what):
    """'all' | '0,5,10' | '0-3,8' -> sorted unique list within 0..bound-1."""
    spec = spec.strip()
    if spec == "all":
        return list(range(bound))
    out = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(-?\d+)(?:-(\d+))?", part)
        if not m:
            die(f"--{what}: cannot parse {part!r}; use 'all', a list like 0,5,10 or ranges like 0-3")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if a < 0:
            a += bound  # -1 = the last one
            b = a if m.group(2) is None else b
        if a > b:
            die(f"--{what}: empty range {part!r}")
        for i in range(a, b + 1):
            if i < 0 or i >= bound:
                die(f"--{what}: {i} is outside 0 .. {bound - 1} (the model has {bound})")
            out.add(i)
    if not out:
        die(f"--{what}: no entries in {spec!r}")
    return sorted(out)


def build_parser():
    p = argparse.ArgumentParser(
        prog="hf_capture.py",
        description="Capture a kvsim trace (post-RoPE keys/values/queries, surprisal, entropy) from a "
                    "Hugging Face causal LM. Needs: pip install torch transformers",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="Hugging Face model id or local directory")
    p.add_argument("--text", required=True, help="UTF-8 text file used as the prompt (the haystack)")
    p.add_argument("-o", "--output", required=True, help="output trace, e.g. OUT.safetensors")
    p.add_argument("--needle", default=None, help="a sentence inserted into the text at a sentence boundary")
    p.add_argument("--depth", type=float, default=0.5,
                   help="where the needle goes, as a fraction of the (truncated) text: 0 = start, 1 = end")
    p.add_argument("--question", default=None,
                   help="text appended after the haystack (e.g. a question about the needle)")
    p.add_argument("--chat", action="store_true",
                   help="wrap the prompt as one user message with the tokenizer's chat template")
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="truncate the text so the prompt has at most this many tokens")
    p.add_argument("--gen", type=int, default=128, help="tokens to generate greedily")
    p.add_argument("--ignore-eos", action="store_true", help="keep generating past an end-of-sequence token")
    p.add_argument("--layers", default="all", help="layers to store: all | 0,5,10 | 0-3 | -1 (last)")
    p.add_argument("--kv-heads", default="all", help="KV heads to store: all | 0,3 | 0-1")
    p.add_argument("--query-heads", default=None,
                   help="query heads to store (default: every query head reading a stored KV head)")
    p.add_argument("--no-values", action="store_true", help="do not store values (halves the file)")
    p.add_argument("--obs-window", type=int, default=64,
                   help="store queries for the last N prompt positions (plus every decode step)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16",
                   help="storage dtype of keys/values/queries in the trace")
    p.add_argument("--model-dtype", choices=("auto", "bf16", "fp16", "fp32"), default="auto",
                   help="dtype to run the model in (auto: the checkpoint's)")
    p.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    p.add_argument("--device-map", default=None,
                   help="pass device_map to from_pretrained (e.g. 'auto' to spread a big model over GPUs); "
                        "overrides --device")
    p.add_argument("--attn-impl", default=None,
                   help="attn_implementation for from_pretrained (sdpa, eager, flash_attention_2)")
    p.add_argument("--prefill-chunk", type=int, default=2048,
                   help="prefill this many tokens per forward (bounds activation and logits memory)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow models with custom code")
    p.add_argument("--strict", action="store_true",
                   help="fail (instead of warning) when recorded keys differ from the model's KV cache")
    p.add_argument("--name", default=None, help="model name stored in the trace (default: from --model)")
    return p


# --------------------------------------------------------------------------------------------------
# Prompt construction.

_BOUNDARY = re.compile(r"[.!?][\"')\]\u201d\u2019]*(?=\s)|\n\s*\n")


def sentence_boundaries(text):
    """Character offsets just after each sentence end (before the following whitespace)."""
    return [m.end() for m in _BOUNDARY.finditer(text)]


def insert_needle(text, needle, depth):
    """Insert `needle` at the sentence boundary nearest depth * len(text); returns (text, char offset)."""
    needle = needle.strip()
    if depth <= 0 or not text:
        return needle + " " + text, 0
    if depth >= 1:
        sep = "" if text[-1:].isspace() else " "
        return text + sep + needle, len(text) + len(sep)
    target = depth * len(text)
    cands = [0] + sentence_boundaries(text) + [len(text)]
    pos = min(cands, key=lambda c: abs(c - target))
    if pos == 0:
        return needle + " " + text, 0
    if pos == len(text):
        sep = "" if text[-1:].isspace() else " "
        return text + sep + needle, len(text) + len(sep)
    # text[:pos] ends a sentence and text[pos] is whitespace: "... end. NEEDLE Next ..."
    return text[:pos] + " " + needle + text[pos:], pos + 1


def build_prompt(tok, args):
    try:
        with open(args.text, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        die(f"--text: cannot read {args.text}: {e}")
    if not text.strip():
        die(f"--text: {args.text} is empty")

    def render(body):
        if args.chat:
            if not getattr(tok, "chat_template", None):
                die("--chat: this tokenizer has no chat template")
            s = tok.apply_chat_template([{"role": "user", "content": body}], tokenize=False,
                                        add_generation_prompt=True)
            return s, False  # the template already holds BOS etc.
        return body, True

    def encode(s, special):
        return tok(s, add_special_tokens=special)["input_ids"]

    tail = ("\n\n" + args.question.strip()) if args.question else ""
    if args.max_prompt_tokens is not None:
        # Cut the haystack so haystack + needle + question + template fit; then re-check after rendering.
        scaffold, special = render(tail)
        reserve = len(encode(scaffold, special)) + 8
        if args.needle:
            reserve += len(encode(" " + args.needle.strip(), False))
        budget = args.max_prompt_tokens - reserve
        if budget < 16:
            die(f"--max-prompt-tokens {args.max_prompt_tokens} leaves no room for the text "
                f"(needle, question and template take about {reserve} tokens)")
        hay = encode(text, False)
        if len(hay) > budget:
            text = tok.decode(hay[:budget], skip_special_tokens=True)
            log(f"text cut to {budget} of its {len(hay)} tokens")
    needle_at = None
    if args.needle:
        text, needle_at = insert_needle(text, args.needle, args.depth)
    body, special = render(text + tail)
    ids = encode(body, special)
    if args.max_prompt_tokens is not None and len(ids) > args.max_prompt_tokens:
        log(f"warning: prompt has {len(ids)} tokens after rendering; cutting its end to {args.max_prompt_tokens}")
        ids = ids[:args.max_prompt_tokens]
    needle_span = None
    if args.needle:
        needle_span = find_token_span(tok, body, special, ids, args.needle.strip())
    return ids, needle_span


def find_token_span(tok, body, special, ids, needle):
    """[first, last+1) token indices covering the needle text, or None when it cannot be located."""
    c0 = body.find(needle)
    if c0 < 0:
        return None
    c1 = c0 + len(needle)
    try:
        enc = tok(body, add_special_tokens=special, return_offsets_mapping=True)
        offs = enc["offset_mapping"][:len(ids)]
    except Exception:  # slow tokenizers have no offsets
        return None
    inside = [i for i, (a, b) in enumerate(offs) if b > a and a < c1 and b > c0]
    return (inside[0], inside[-1] + 1) if inside else None


def token_strings(tok, ids):
    """Each token's text with its leading whitespace, for sentence boundaries."""
    out = []
    for p in tok.convert_ids_to_tokens(ids):
        if p is None:
            out.append("")
        elif re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", p):  # SentencePiece byte fallback
            out.append(chr(int(p[3:5], 16)) if int(p[3:5], 16) < 128 else "")
        elif "\u2581" in p:  # SentencePiece: '▁' marks a space
            out.append(p.replace("\u2581", " "))
        else:  # byte-level BPE ('Ġ' = space, 'Ċ' = newline) and the rest
            try:
                out.append(tok.convert_tokens_to_string([p]))
            except Exception:
                out.append(p)
    return out


# --------------------------------------------------------------------------------------------------
# Model plumbing (transformers 4.4x and 5.x).

def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def load_model(args, torch, transformers):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = {"auto": "auto", "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.model_dtype]
    kw = {"trust_remote_code": args.trust_remote_code}
    if args.attn_impl:
        kw["attn_implementation"] = args.attn_impl
    if args.device_map:
        kw["device_map"] = args.device_map
    # transformers renamed torch_dtype to dtype in 4.56; 5.x warns about the old name.
    kw["dtype" if version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"] = dtype
    log(f"loading {args.model} (transformers {transformers.__version__}, torch {torch.__version__})")
    try:
        tok = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(args.model, **kw)
    except (OSError, ValueError) as e:
        die(f"cannot load model {args.model!r}: {e}")
    if not args.device_map:
        model.to(args.device)
    model.eval()
    return tok, model


def model_shape(model):
    cfg = model.config
    if hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    L = cfg.num_hidden_layers
    H = cfg.num_attention_heads
    Hkv = getattr(cfg, "num_key_value_heads", None) or H
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    theta = getattr(cfg, "rope_theta", None)
    rp = getattr(cfg, "rope_parameters", None)  # transformers 5.x
    if theta is None and isinstance(rp, dict):
        theta = rp.get("rope_theta")
        if theta is None:  # per layer type, e.g. {"full_attention": {...}, "sliding_attention": {...}}
            for v in rp.values():
                if isinstance(v, dict) and v.get("rope_theta"):
                    theta = v["rope_theta"]
                    break
    return L, H, Hkv, d, float(theta or 10000.0)


def attention_modules(model, L):
    """{layer index: attention module} for decoder layers named '...layers.N.self_attn'."""
    found = {}
    for name, mod in model.named_modules():
        m = re.search(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|attention|attn)$", name)
        if m and int(m.group(1)) < L and int(m.group(1)) not in found:
            found[int(m.group(1))] = mod
    return found


def dtype_name(torch, dt):
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}.get(dt, str(dt))


def rotate_half(x, torch):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Recorder:
    """Holds the selected layers' hooks and what they recorded.

    The driver sets `pos0, pos1` (the token positions of the forward about to run) and `q_from`
    (the first position whose query is stored). Recorded chunks stay on the device until flush(),
    which concatenates them and moves them to the CPU in the storage dtype."""

    def __init__(self, torch, model, mods, layers, kv_heads, query_heads, head_dim, store_dtype, keep_values):
        self.torch = torch
        self.layers = layers
        self.d = head_dim
        self.store_dtype = store_dtype
        self.keep_values = keep_values
        self.pos0 = self.pos1 = 0
        self.q_from = 0
        self.error = None
        self.pending = {l: {"k": [], "v": [], "q": []} for l in layers}
        self.done = {l: {"k": [], "v": [], "q": []} for l in layers}
        self.handles = []
        self.rotary_fallback = getattr(getattr(model, "model", model), "rotary_emb", None)
        for l in layers:
            mod = mods[l]
            for attr in ("q_proj", "k_proj", "v_proj"):
                if not hasattr(mod, attr):
                    die(f"layer {l}: attention module {type(mod).__name__} has no {attr}; hf_capture supports "
                        "Llama/Qwen/Mistral-style attention with separate q/k/v projections")
            modeling = sys.modules.get(type(mod).__module__)
            apply_fn = getattr(modeling, "apply_rotary_pos_emb", None)
            kv_idx = torch.tensor(kv_heads, dtype=torch.long)
            q_idx = torch.tensor(query_heads, dtype=torch.long)
            self.handles.append(mod.register_forward_pre_hook(
                self._make_hook(l, apply_fn, kv_idx, q_idx), with_kwargs=True))

    def _rope(self, mod, apply_fn, q, k, v, args, kwargs):
        torch = self.torch
        pe = kwargs.get("position_embeddings")
        if pe is None and len(args) > 1 and isinstance(args[1], (tuple, list)) and len(args[1]) == 2:
            pe = args[1]
        if pe is None:  # older transformers: the module (or the model) owns the rotary embedding
            pos_ids = kwargs.get("position_ids")
            if pos_ids is None:
                pos_ids = torch.arange(self.pos0, self.pos1, device=q.device).unsqueeze(0)
            rot = getattr(mod, "rotary_emb", None) or self.rotary_fallback
            if rot is None:
                raise RuntimeError("no position_embeddings passed and no rotary_emb found")
            params = inspect.signature(rot.forward).parameters
            if "position_ids" in params:  # transformers 4.38 .. 4.47: rotary_emb(x, position_ids)
                pe = rot(v, pos_ids)
            else:  # older: rotary_emb(x, seq_len) returns [seq_len, d] tables indexed by position
                cos_t, sin_t = rot(v, seq_len=int(pos_ids.max()) + 1)
                pe = (cos_t[pos_ids].to(q.dtype), sin_t[pos_ids].to(q.dtype))
        cos, sin = pe
        if apply_fn is not None:
            try:
                return apply_fn(q, k, cos, sin)
            except TypeError:
                pass
        # The HF Llama convention ("rotate half": dimension i pairs with i + d/2).
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q, torch) * sin, k * cos + rotate_half(k, torch) * sin

    def _make_hook(self, layer, apply_fn, kv_idx, q_idx):
        torch = self.torch

        def hook(mod, args, kwargs):
            if self.error is not None:
                return None
            try:
                hs = kwargs.get("hidden_states")
                if hs is None:
                    hs = args[0]
                B, n, _ = hs.shape
                d = self.d
                if n != self.pos1 - self.pos0:
                    raise RuntimeError(f"attention saw {n} tokens, the driver expected {self.pos1 - self.pos0}")
                q = mod.q_proj(hs).view(B, n, -1, d)
                k = mod.k_proj(hs).view(B, n, -1, d)
                v = mod.v_proj(hs).view(B, n, -1, d)
                if hasattr(mod, "q_norm") and mod.q_norm is not None:  # Qwen3-style per-head RMSNorm
                    q = mod.q_norm(q)
                if hasattr(mod, "k_norm") and mod.k_norm is not None:
                    k = mod.k_norm(k)
                q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, n, d]
                q, k = self._rope(mod, apply_fn, q, k, v, args, kwargs)
                dev = k.device
                rec = self.pending[layer]
                rec["k"].append(k[0].index_select(0, kv_idx.to(dev)).to(self.store_dtype))
                if self.keep_values:
                    rec["v"].append(v[0].index_select(0, kv_idx.to(dev)).to(self.store_dtype))
                first = max(self.q_from, self.pos0) - self.pos0
                if first < n:
                    rec["q"].append(q[0, :, first:].index_select(0, q_idx.to(dev)).to(self.store_dtype))
            except Exception as e:  # re-raised by the driver; an exception here would be hard to read
                self.error = (layer, e)
            return None

        return hook

    def flush(self):
        torch = self.torch
        for l in self.layers:
            for key in ("k", "v", "q"):
                chunks = self.pending[l][key]
                if chunks:
                    self.done[l][key].append(torch.cat(chunks, dim=1).cpu())
                    self.pending[l][key] = []

    def check(self):
        if self.error is not None:
            layer, e = self.error
            raise RuntimeError(f"recording layer {layer} failed: {type(e).__name__}: {e}") from e

    def stacked(self, key):
        """[Ls, heads, rows, d] on the CPU."""
        self.flush()
        torch = self.torch
        return torch.stack([torch.cat(self.done[l][key], dim=1) for l in self.layers])

    def remove(self):
        for h in self.handles:
            h.remove()


def cache_layer_kv(cache, layer):
    """(keys, values) [B, Hkv, n, d] of one layer from a transformers cache, whatever its version."""
    if hasattr(cache, "layers") and not isinstance(cache, (tuple, list)):  # transformers >= 4.54 / 5.x
        lay = cache.layers[layer]
        return lay.keys, lay.values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    return cache[layer][0], cache[layer][1]


def verify_against_cache(torch, rec, cache, kv_heads, P, strict):
    """Compare the recorded prefill keys/values with the model's own KV cache."""
    worst = 0.0
    try:
        for slot, l in enumerate(rec.layers):
            ck, cv = cache_layer_kv(cache, l)
            ck = ck[0].index_select(0, torch.tensor(kv_heads, device=ck.device)).float().cpu()
            mine = torch.cat(rec.done[l]["k"], dim=1)[:, :P].float()
            n = min(ck.shape[1], mine.shape[1])  # sliding-window caches keep only the last tokens
            a, b = ck[:, ck.shape[1] - n:], mine[:, P - n:P]
            scale = a.abs().max().item() or 1.0
            worst = max(worst, (a - b).abs().max().item() / scale)
    except Exception as e:  # noqa: BLE001
        log(f"warning: could not compare recorded keys with the KV cache ({type(e).__name__}: {e})")
        return
    msg = f"recorded keys vs the model's KV cache: max relative difference {worst:.2e}"
    if worst > 2e-2:
        if strict:
            die(msg + " — the hooks do not reproduce this model's attention (--strict)")
        log("WARNING: " + msg + " — the hooks may not reproduce this model's attention inputs")
    else:
        log(msg)


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gen < 0:
        die("--gen must be >= 0")
    if args.obs_window < 0:
        die("--obs-window must be >= 0")
    if args.gen == 0 and args.obs_window == 0:
        die("nothing to store: --gen 0 and --obs-window 0 leave no queries")
    if not (0.0 <= args.depth <= 1.0):
        die("--depth must be within 0 .. 1")
    if args.prefill_chunk < 1:
        die("--prefill-chunk must be >= 1")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        die(f"-o: directory {out_dir} does not exist")

    try:
        import torch
        import transformers
    except ImportError as e:
        die(f"{e.name or 'torch/transformers'} is not installed. hf_capture.py needs PyTorch and transformers:\n"
            "    pip install torch transformers\n"
            "(on a GPU box pick the torch build matching its CUDA; see docs/capture.md)")
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cpu":
        log("note: running on the CPU; fine for small models, slow for anything big")

    tok, model = load_model(args, torch, transformers)
    L, H, Hkv, d, theta = model_shape(model)
    layers = parse_index_list(args.layers, L, "layers")
    kv_heads = parse_index_list(args.kv_heads, Hkv, "kv-heads")
    group = H // Hkv
    if args.query_heads is None:
        query_heads = [q for q in range(H) if q // group in set(kv_heads)]
    else:
        query_heads = parse_index_list(args.query_heads, H, "query-heads")
        bad = [q for q in query_heads if q // group not in kv_heads]
        if bad:
            die(f"--query-heads: {bad} read KV heads {sorted({q // group for q in bad})} "
                f"(group size {group}), which --kv-heads does not store")
    mods = attention_modules(model, L)
    missing = [l for l in layers if l not in mods]
    if missing:
        die(f"cannot find the attention module of layer(s) {missing} (looked for '...layers.N.self_attn'); "
            f"model class {type(model).__name__} is not supported")

    ids, needle_span = build_prompt(tok, args)
    P = len(ids)
    W = min(args.obs_window, P)
    T_max = P + args.gen
    store = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    item = 2 if args.dtype != "fp32" else 4
    per = T_max * len(layers) * len(kv_heads) * d * item
    qbytes = (W + args.gen) * len(layers) * len(query_heads) * d * item
    log(f"model: {L} layers, {H} heads, {Hkv} KV heads, head_dim {d}, rope_theta {theta:g}, "
        f"dtype {dtype_name(torch, model.dtype)}")
    log(f"prompt {P} tokens, generating up to {args.gen}; storing layers {layers if len(layers) <= 8 else len(layers)}, "
        f"{len(kv_heads)} KV heads, {len(query_heads)} query heads, {W + args.gen} query rows")
    log(f"trace size about {human(per * (1 if args.no_values else 2) + qbytes)} "
        f"(keys {human(per)}{'' if args.no_values else ', values the same'}, queries {human(qbytes)})")
    maxpos = getattr(model.config, "max_position_embeddings", None)
    if maxpos and T_max > maxpos:
        log(f"warning: {T_max} tokens exceed the model's max_position_embeddings = {maxpos}")

    rec = Recorder(torch, model, mods, layers, kv_heads, query_heads, d, store, not args.no_values)
    rec.q_from = P - W
    device = model.get_input_embeddings().weight.device
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    surprisal = [0.0] * P
    entropy, varentropy = [], []
    gen_ids = []
    eos = getattr(model.generation_config, "eos_token_id", None) if hasattr(model, "generation_config") else None
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else ([eos] if eos is not None else []))
    if tok.eos_token_id is not None:
        eos_ids.add(tok.eos_token_id)

    try:
        with torch.inference_mode():
            past = None
            last = None
            t_pre = time.time()
            for a in range(0, P, args.prefill_chunk):
                b = min(P, a + args.prefill_chunk)
                rec.pos0, rec.pos1 = a, b
                out = model(input_ids=input_ids[:, a:b], past_key_values=past, use_cache=True)
                rec.check()
                past = out.past_key_values
                lg = out.logits[0].float()
                # Row i predicts token a+i+1; the previous chunk's last row predicts token a.
                if last is not None:
                    surprisal[a] = float(torch.logsumexp(last, -1) - last[ids[a]])
                tgt = torch.tensor(ids[a + 1:b], dtype=torch.long, device=lg.device)
                if len(tgt):
                    rows = lg[:len(tgt)]
                    s = torch.logsumexp(rows, -1) - rows.gather(1, tgt[:, None])[:, 0]
                    surprisal[a + 1:b] = s.tolist()
                last = lg[-1].clone()
                del out, lg
                rec.flush()
                log(f"prefill {b}/{P} tokens ({b / max(time.time() - t_pre, 1e-9):.0f} tok/s)")
            verify_against_cache(torch, rec, past, kv_heads, P, args.strict)

            t_dec = time.time()
            for i in range(args.gen):
                lp = torch.log_softmax(last, -1)
                p = lp.exp()
                ent = float(-(p * lp).sum())
                var = float((p * (-lp - ent) ** 2).sum())
                nxt = int(torch.argmax(last))
                entropy.append(ent)
                varentropy.append(max(var, 0.0))
                surprisal.append(float(-lp[nxt]))
                gen_ids.append(nxt)
                pos = P + i
                rec.pos0, rec.pos1 = pos, pos + 1
                out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long, device=device),
                            past_key_values=past, use_cache=True)
                rec.check()
                past = out.past_key_values
                last = out.logits[0, -1].float()
                del out
                if (i + 1) % 64 == 0:
                    rec.flush()
                if (i + 1) % 32 == 0 or i + 1 == args.gen:
                    log(f"decode {i + 1}/{args.gen} ({(i + 1) / max(time.time() - t_dec, 1e-9):.1f} tok/s)")
                if nxt in eos_ids and not args.ignore_eos:
                    log(f"end-of-sequence token after {i + 1} generated tokens")
                    break
            rec.flush()
    finally:
        rec.remove()

    all_ids = ids + gen_ids
    T = len(all_ids)
    S_pos = list(range(P - W, T))
    keys = rec.stacked("k")
    queries = rec.stacked("q")
    values = None if args.no_values else rec.stacked("v")
    if keys.shape[2] != T or queries.shape[2] != len(S_pos):
        raise RuntimeError(f"internal: recorded {keys.shape[2]} key rows and {queries.shape[2]} query rows; "
                           f"expected {T} and {len(S_pos)}")

    starts = kvsim_trace.sentence_starts_from_tokens(token_strings(tok, all_ids))
    name = args.name or os.path.basename(os.path.normpath(args.model))
    text_desc = args.text
    if args.needle:
        text_desc += f" + needle {args.needle.strip()!r} at depth {args.depth:g}"
    if args.question:
        text_desc += f" + question {args.question.strip()!r}"
    meta = {
        "schema": 1,
        "model": {"name": name, "layers": L, "heads": H, "kv_heads": Hkv, "head_dim": d, "rope_theta": theta,
                  "dtype": dtype_name(torch, model.dtype)},
        "layers": layers, "kv_heads": kv_heads, "query_heads": query_heads,
        "prompt_tokens": P,
        "sentence_starts": starts,
        "source": {"kind": "huggingface", "model": args.model, "text": text_desc,
                   "command": " ".join(shlex.quote(a) for a in ["python3", sys.argv[0]]
                                       + (list(argv) if argv is not None else sys.argv[1:])),
                   "seed": -1},
    }
    extra = {"kvsim_capture": json.dumps({
        "tool": "hf_capture.py", "transformers": transformers.__version__, "torch": torch.__version__,
        "generated_text": tok.decode(gen_ids, skip_special_tokens=False),
        "needle": args.needle, "needle_depth": args.depth if args.needle else None,
        "needle_tokens": list(needle_span) if needle_span else None,
        "obs_window": W,
    }, ensure_ascii=True)}
    tensors = {"keys": keys, "queries": queries, "query_positions": S_pos, "token_ids": all_ids,
               "surprisal": surprisal}
    if values is not None:
        tensors["values"] = values
    if entropy:
        tensors["entropy"] = entropy
        tensors["varentropy"] = varentropy
    log(f"writing {args.output}: T = {T}, P = {P}, S = {len(S_pos)}, {len(starts)} sentences")
    kvsim_trace.write_trace(args.output, meta, tensors, dtype=args.dtype, extra_metadata=extra)
    size = os.path.getsize(args.output)
    log(f"wrote {args.output} ({human(size)}); check it with: kvsim trace info {args.output}")
    if gen_ids:
        preview = tok.decode(gen_ids[:64], skip_special_tokens=True).replace("\n", " ")
        log(f"generated: {preview!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
