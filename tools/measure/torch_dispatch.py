#!/usr/bin/env python3
"""Measures what an eager PyTorch decode loop costs the host, for kvsim's implementation profiles
(`implementation: {dispatch: eager, ops_per_layer, ops_per_step, dispatch_us}`, docs/scenarios.md).

1. dispatch_us: host time per operator of a Hugging Face decode step in PyTorch eager mode on this
   CPU, Python glue included: the time of one decode layer of a tiny Llama (compute negligible: hidden
   64) divided by the operators it issues (median over many steps). For reference it also prints the
   bare cost of single aten calls. On a GPU each kernel-launching operator also pays cudaLaunchKernel,
   which kvsim takes from the hardware file (launch.host_launch_us): this script measures only the
   part a CPU can measure.
2. loop_us: host time per decode step of generate()'s own loop, outside the model's forward pass
   (preparing inputs and cache positions, logits processors, stopping criteria): the per-step time of
   generate() on a one-layer tiny Llama (two lengths differenced, so prefill and setup cancel) less
   the per-step time of the same forward pass and greedy argmax run by hand.
3. ops_per_layer / ops_per_step: the operators one decode step of a Hugging Face Llama issues, counted
   with the PyTorch profiler on a small randomly initialized configuration (no weights needed): the
   top-level aten operators (the ones Python calls; nested ones run inside them), per decoder layer
   (the difference between 2 and 1 layers) and outside the layers; and of those, the ones that launch
   a kernel (views, reshapes and other metadata-only operators launch none).

Needs torch and transformers (PyPI). Prints YAML to paste into a scenario's implementation block.
The model is a tiny Llama (`--arch llama`, also LongChat's architecture) or Qwen2 (`--arch qwen2`,
Qwen2 and Qwen2.5): use the architecture of the scenario's model (docs/reproductions.md, miss 1, the
dispatch rule).
Usage: python3 tools/measure/torch_dispatch.py [--arch llama|qwen2] [--attn sdpa|eager] [--calls 20000]
"""
import argparse
import statistics
import time

import torch


def dispatch_us(calls):
    torch.set_num_threads(1)
    a, b = torch.ones(1), torch.ones(1)
    w, x = torch.ones(8, 8), torch.ones(1, 8)
    ops = [lambda: torch.add(a, b), lambda: torch.mul(a, b), lambda: torch.nn.functional.linear(x, w),
           lambda: a.view(1, 1), lambda: torch.cat([a, b]), lambda: torch.rsqrt(a)]
    per_op = []
    for op in ops:
        for _ in range(1000):
            op()
        samples = []
        for _ in range(9):
            t = time.perf_counter()
            for _ in range(calls // 9):
                op()
            samples.append((time.perf_counter() - t) / (calls // 9))
        per_op.append(statistics.median(samples))
    return statistics.median(per_op) * 1e6, [p * 1e6 for p in per_op]


METADATA_OPS = {"aten::view", "aten::reshape", "aten::transpose", "aten::unsqueeze", "aten::squeeze",
                "aten::expand", "aten::slice", "aten::select", "aten::t", "aten::detach", "aten::alias",
                "aten::as_strided", "aten::_unsafe_view", "aten::contiguous", "aten::size", "aten::lift_fresh",
                "aten::to", "aten::_to_copy_noop", "aten::empty", "aten::arange_noop", "aten::is_nonzero"}


ARCH = "llama"  # set from --arch in main()


def tiny_llama(layers, attn):
    """A tiny randomly initialized model of the chosen architecture (hidden 64: compute negligible)."""
    import transformers
    config, model = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
                     "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}[ARCH]
    torch.manual_seed(0)
    cfg = getattr(transformers, config)(vocab_size=128, hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=layers, num_attention_heads=4,
                                        num_key_value_heads=2, max_position_embeddings=4096)
    cfg._attn_implementation = attn
    return getattr(transformers, model)(cfg).eval()


def dynamic_cache():
    """The cache object generate() decodes with (DynamicCache): a step fed the legacy tuple format would
    also time its conversion to and from a DynamicCache, which generate() does not do."""
    from transformers import DynamicCache
    return DynamicCache()


def step_seconds(layers, attn, steps=300):
    torch.set_num_threads(1)
    model = tiny_llama(layers, attn)
    ids = torch.randint(0, 128, (1, 16))
    times = []
    with torch.no_grad():
        out = model(ids, past_key_values=dynamic_cache(), use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for i in range(steps):
            t = time.perf_counter()
            out = model(nxt, past_key_values=past, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
            if i >= 20:
                times.append(time.perf_counter() - t)
            past = out.past_key_values
    return statistics.median(times)


def generate_step_seconds(attn, short=40, long=240, repeats=7):
    """Host time per decode step of Hugging Face generate() with a one-layer tiny Llama: the difference
    between two generation lengths, so prompt prefill and generate()'s setup cancel out."""
    torch.set_num_threads(1)
    model = tiny_llama(1, attn)
    ids = torch.randint(0, 128, (1, 16))
    kw = dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)

    def run(n):
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        return time.perf_counter() - t

    run(short)  # warm-up
    per_step = [(run(long) - run(short)) / (long - short) for _ in range(repeats)]
    return statistics.median(per_step)


def top_level_ops(prof):
    """(operators, kernel-launching operators) among the top-level aten calls of a profile: the ones
    Python issues; nested ones run inside them."""
    n = k = 0
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            n += 1
            k += e.name not in METADATA_OPS
    return n, k


def count_generate_ops(attn, short=8, long=24):
    """Operators per decode step of generate() with a one-layer tiny Llama, the forward pass included:
    the difference between two generation lengths, so prefill and setup cancel out."""
    model = tiny_llama(1, attn)
    ids = torch.randint(0, 128, (1, 16))
    kw = dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)
    counts = []
    for n in (short, long):
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        counts.append(top_level_ops(prof))
    return ((counts[1][0] - counts[0][0]) / (long - short), (counts[1][1] - counts[0][1]) / (long - short))


def count_decode_ops(layers, attn):
    model = tiny_llama(layers, attn)
    ids = torch.randint(0, 128, (1, 16))
    with torch.no_grad():
        out = model(ids, past_key_values=dynamic_cache(), use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step = model(nxt, past_key_values=past, use_cache=True)
            step.logits[:, -1].argmax(-1)  # greedy sampling, as generate() does
    return top_level_ops(prof)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="llama", choices=["llama", "qwen2"])
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    global ARCH
    ARCH = a.arch
    bare_us, each = dispatch_us(a.calls)
    (one, k1), (two, k2) = count_decode_ops(1, a.attn), count_decode_ops(2, a.attn)
    per_layer, kernels_per_layer = two - one, k2 - k1
    layer_s = step_seconds(2, a.attn) - step_seconds(1, a.attn)
    us = layer_s / per_layer * 1e6
    # generate()'s own loop per step (input and cache-position updates, logits processors, stopping
    # criteria) beyond the forward pass and greedy argmax that step_seconds times by hand.
    loop_us = (generate_step_seconds(a.attn) - step_seconds(1, a.attn)) * 1e6
    gen_ops, gen_kernels = count_generate_ops(a.attn)  # one layer plus everything outside it, per step
    import transformers
    print(f"# measured by tools/measure/torch_dispatch.py --arch {a.arch} --attn {a.attn}: transformers {transformers.__version__}, "
          f"torch {torch.__version__}, 1 thread. One tiny-{a.arch} "
          f"decoder layer costs {layer_s * 1e6:.1f} us of host time for {per_layer} operators; a bare aten call costs "
          f"{bare_us:.2f} us (add, mul, linear, view, cat, rsqrt: {', '.join(f'{x:.2f}' for x in each)})")
    print("dispatch: eager")
    print(f"ops_per_layer: {per_layer}          # top-level aten operators per {a.arch} decoder layer in one decode step ({a.attn} attention)")
    print(f"kernels_per_layer: {kernels_per_layer}      # of those, the ones that launch a kernel")
    print(f"ops_per_step: {one - per_layer}           # outside the layers: embedding, final norm, LM head, sampling")
    print(f"kernels_per_step: {k1 - kernels_per_layer}")
    print(f"dispatch_us: {us:.2f}         # host time per operator, Hugging Face's Python included")
    print(f"loop_us: {loop_us:.1f}           # host time per step of generate()'s own loop, outside the forward pass")
    print(f"# generate(): {gen_ops - per_layer:.0f} operators ({gen_kernels - kernels_per_layer:.0f} launching kernels) per step "
          f"outside the layers, its own loop included (the forward pass alone: {one - per_layer}, {k1 - kernels_per_layer})")
    print(f"# a bare aten call: {bare_us:.2f} us")


if __name__ == "__main__":
    main()
