#!/usr/bin/env python3
"""End-to-end check of hf_capture.py on tiny random models built offline (needs torch + transformers).

    python3 tools/capture/smoke_hf_capture.py OUTDIR

Builds a byte-level BPE tokenizer trained on a generated text and tiny random Llama (GQA), Qwen2
(q/k/v biases) and Qwen3 (q_norm/k_norm) models, runs hf_capture.py on each (CPU, fp32, chunked
prefill, needle, decode) and checks the trace against an independent full-sequence forward with eager
attention: attention probabilities recomputed from the stored post-RoPE q and k equal the model's,
stored keys/values equal its KV cache, surprisal/entropy/varentropy equal its logits, and the
generated tokens are its greedy choices. Prints "N passed, M failed" last; without torch it prints
that it skipped and exits 0. No network access is needed.
"""

import math
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kvsim_trace as kt  # noqa: E402

_results = []


def check(name, cond, detail=""):
    _results.append((name, bool(cond)))
    print(f"{'ok  ' if cond else 'FAIL'} {name} {detail}", file=sys.stderr)


WORDS = ("the cat sat on a mat while rain fell over old stone houses and quiet rivers ran toward the "
         "sea where ships waited for morning light to carry grain salt wool and letters").split()


def make_text(n_sentences, seed=5):
    r = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        s = " ".join(r.choice(WORDS) for _ in range(r.randint(5, 14)))
        out.append(s[0].upper() + s[1:] + r.choice(".!?"))
    return " ".join(out) + "\n"


def build_tokenizer(path, text):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator([text], trainer)
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(path)
    return fast


def build_model(kind, path, vocab):
    import torch
    import transformers

    torch.manual_seed(0)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  rope_theta=10000.0, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    elif kind == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    else:
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **common))
    with torch.no_grad():  # larger random weights so attention is far from uniform
        for n, p in model.named_parameters():
            if "q_proj" in n or "k_proj" in n:
                p.mul_(6.0)
            if n.endswith("bias"):
                p.normal_(0, 0.5)
    model.save_pretrained(path)


def reference(model_dir, ids):
    import torch
    import transformers

    from hf_capture import version_tuple

    kw = {"dtype" if version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype": torch.float32}
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", **kw)
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=True)
    return model, out


def check_trace(kind, model_dir, trace):
    import torch
    from hf_capture import cache_layer_kv

    meta = kt.read_meta(trace)
    header, _ = kt.read_header(trace)
    ids = kt.read_tensor(trace, "token_ids")
    qpos = kt.read_tensor(trace, "query_positions")
    P, T, S = meta["prompt_tokens"], len(ids), len(qpos)
    d = meta["model"]["head_dim"]
    Ls, Hks, Hqs = len(meta["layers"]), len(meta["kv_heads"]), len(meta["query_heads"])
    check(f"{kind}: shapes", header["keys"]["shape"] == [Ls, Hks, T, d] and header["queries"]["shape"] == [Ls, Hqs, S, d],
          str({k: v["shape"] for k, v in header.items()}))
    check(f"{kind}: source kind", meta["source"]["kind"] == "huggingface")
    keys = torch.tensor(kt.read_tensor(trace, "keys")).view(Ls, Hks, T, d)
    values = torch.tensor(kt.read_tensor(trace, "values")).view(Ls, Hks, T, d)
    queries = torch.tensor(kt.read_tensor(trace, "queries")).view(Ls, Hqs, S, d)
    model, out = reference(model_dir, ids)
    cfg = model.config
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    scale = getattr(model.model.layers[0].self_attn, "scaling", d ** -0.5)
    worst_p = worst_k = worst_v = 0.0
    for ls, layer in enumerate(meta["layers"]):
        ck, cv = cache_layer_kv(out.past_key_values, layer)
        for hs, kvh in enumerate(meta["kv_heads"]):
            worst_k = max(worst_k, (ck[0, kvh] - keys[ls, hs]).abs().max().item())
            worst_v = max(worst_v, (cv[0, kvh] - values[ls, hs]).abs().max().item())
        attn = out.attentions[layer][0]  # [H, T, T]
        for qs, qh in enumerate(meta["query_heads"]):
            ks = meta["kv_heads"].index(qh // group)
            for s, p in enumerate(qpos):
                logits = keys[ls, ks, :p + 1] @ queries[ls, qs, s] * scale
                probs = torch.softmax(logits, -1)
                worst_p = max(worst_p, (probs - attn[qh, p, :p + 1]).abs().max().item())
    check(f"{kind}: keys == model KV cache", worst_k < 1e-4, f"max |diff| {worst_k:.2e}")
    check(f"{kind}: values == model KV cache", worst_v < 1e-4, f"max |diff| {worst_v:.2e}")
    check(f"{kind}: softmax(q.k) from the trace == model attention", worst_p < 1e-4, f"max |diff| {worst_p:.2e}")
    lg = out.logits[0].float()
    lp = torch.log_softmax(lg, -1)
    want_s = [0.0] + [-lp[t - 1, ids[t]].item() for t in range(1, T)]
    got_s = kt.read_tensor(trace, "surprisal")
    ds = max(abs(a - b) for a, b in zip(got_s, want_s))
    check(f"{kind}: surprisal", ds < 1e-3, f"max |diff| {ds:.2e}")
    greedy = [int(lg[t - 1].argmax()) for t in range(P, T)]
    check(f"{kind}: generated tokens are greedy", greedy == ids[P:], f"{greedy} vs {ids[P:]}")
    ent, var = kt.read_tensor(trace, "entropy"), kt.read_tensor(trace, "varentropy")
    de = dv = 0.0
    for i in range(T - P):
        row = lp[P - 1 + i]
        p = row.exp()
        h = -(p * row).sum().item()
        v = (p * (-row - h) ** 2).sum().item()
        de, dv = max(de, abs(h - ent[i])), max(dv, abs(v - var[i]))
    check(f"{kind}: entropy / varentropy", de < 1e-3 and dv < 1e-3 and len(ent) == T - P, f"{de:.2e} {dv:.2e}")
    check(f"{kind}: query positions", qpos == list(range(P - min(8, P), T)), str(qpos))
    starts = meta["sentence_starts"]
    check(f"{kind}: several sentences", len(starts) > 5 and starts[0] == 0, str(starts[:10]))
    return meta


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
        import transformers
        import tokenizers  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e.name} is not installed (pip install torch transformers)")
        return 0
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    text = make_text(120)
    text_path = os.path.join(out, "haystack.txt")
    with open(text_path, "w") as f:
        f.write(text)
    tok_dir = os.path.join(out, "tok")
    tok = build_tokenizer(tok_dir, text)
    kinds = ["llama", "qwen2"] + (["qwen3"] if hasattr(transformers, "Qwen3ForCausalLM") else [])
    for kind in kinds:
        model_dir = os.path.join(out, f"tiny-{kind}")
        build_model(kind, model_dir, len(tok))
        tok.save_pretrained(model_dir)
        trace = os.path.join(out, f"hf_{kind}.safetensors")
        needle = "The secret code is 7341."
        cmd = [sys.executable, os.path.join(HERE, "hf_capture.py"), "--model", model_dir, "--text", text_path,
               "--needle", needle, "--depth", "0.4", "--max-prompt-tokens", "300", "--gen", "12",
               "--ignore-eos", "--layers", "0,2", "--kv-heads", "1", "--obs-window", "8", "--dtype", "fp32",
               "--model-dtype", "fp32", "--device", "cpu", "--prefill-chunk", "64", "--strict", "-o", trace]
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(f"{kind}: hf_capture.py exit 0", r.returncode == 0, r.stderr[-3000:] if r.returncode else "")
        if r.returncode:
            continue
        check(f"{kind}: cache comparison ran", "recorded keys vs the model's KV cache" in r.stderr)
        meta = check_trace(kind, model_dir, trace)
        check(f"{kind}: query heads of kv head 1", meta["query_heads"] == [2, 3], str(meta["query_heads"]))
        _, md = kt.read_header(trace)
        import json
        cap = json.loads(md["kvsim_capture"])
        ids = kt.read_tensor(trace, "token_ids")
        span = cap["needle_tokens"]
        got = tok.decode(ids[span[0]:span[1]]) if span else ""
        check(f"{kind}: needle located", span is not None and needle in got, f"{span} {got!r}")
        check(f"{kind}: prompt within --max-prompt-tokens", meta["prompt_tokens"] <= 300, str(meta["prompt_tokens"]))
    # bf16 storage and a bf16 model run too (values are only checked for shape here).
    trace = os.path.join(out, "hf_llama_bf16.safetensors")
    cmd = [sys.executable, os.path.join(HERE, "hf_capture.py"), "--model", os.path.join(out, "tiny-llama"),
           "--text", text_path, "--max-prompt-tokens", "100", "--gen", "4", "--model-dtype", "bf16",
           "--device", "cpu", "--no-values", "-o", trace]
    r = subprocess.run(cmd, capture_output=True, text=True)
    check("llama bf16: exit 0", r.returncode == 0, r.stderr[-3000:] if r.returncode else "")
    if r.returncode == 0:
        header, _ = kt.read_header(trace)
        check("llama bf16: no values, BF16 keys", "values" not in header and header["keys"]["dtype"] == "BF16"
              and header["keys"]["shape"][:2] == [3, 2], str(header["keys"]))
    failed = sum(1 for _, ok in _results if not ok)
    print(f"{len(_results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
