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
4. Host-device syncs: every aten::_local_scalar_dense (Tensor.item(), bool(tensor), `x in tensor`)
   copies a GPU value to the host and blocks the host until the GPU has run everything issued before
   it. Counted per decoder layer and per step of generate(), with the Transformers line that calls
   each (sync_per_layer); and ops_before_layers / kernels_before_layers: of the forward pass's
   operators outside the layers (ops_per_step), those issued before the first layer (embedding,
   rotary embedding, mask). generate()'s own loop (loop_us) issues its operators between the step's
   first sync (its stopping check ends the previous step) and the forward pass, so no GPU work of the
   step overlaps it or these; the count of the loop's operators there is printed as a comment only:
   their time is in loop_us, not in ops_per_step (docs/reproductions.md, miss 1, the dispatch rule).

flash_attention_2 runs without flash-attn (absent on a CPU): flash_attn_func is replaced by one
operator (torch.empty_like), where flash-attn launches one kernel; Transformers' own code around it,
whose operators and syncs are what is counted here, runs unchanged. It runs in bfloat16, as
flash-attn requires 16-bit inputs (in float32 Transformers adds casts a GPU run does not have).

Needs torch and transformers (PyPI). Prints YAML to paste into a scenario's implementation block.
The model is a tiny Llama (`--arch llama`, also LongChat's architecture) or Qwen2 (`--arch qwen2`,
Qwen2 and Qwen2.5): use the architecture, Transformers version and attention implementation of the
scenario's model (docs/reproductions.md, miss 1, the dispatch rule).
Usage: python3 tools/measure/torch_dispatch.py [--arch llama|qwen2] [--attn sdpa|eager|flash_attention_2] [--calls 20000]
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
    """A tiny randomly initialized model of the chosen architecture (--arch; hidden 64: compute
    negligible)."""
    import transformers
    config, model_class = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
                           "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}[ARCH]
    torch.manual_seed(0)
    cfg = getattr(transformers, config)(vocab_size=128, hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=layers, num_attention_heads=4,
                                        num_key_value_heads=2, max_position_embeddings=4096)
    if attn != "flash_attention_2":
        cfg._attn_implementation = attn
        return getattr(transformers, model_class)(cfg).eval()
    # Transformers refuses flash_attention_2 without flash-attn and a GPU: build the model eager, then
    # give its layers the flash-attention class and the model the flash-attention mask path.
    cfg._attn_implementation = "eager"
    model = getattr(transformers, model_class)(cfg).eval().to(torch.bfloat16)
    import importlib
    import transformers.modeling_flash_attention_utils as fa
    ml = importlib.import_module(f"transformers.models.{ARCH}.modeling_{ARCH}")
    fa.flash_attn_func = lambda q, k, v, *a, **kw: torch.empty_like(q)  # flash-attn's one kernel
    fa._flash_supports_window_size = False
    model.config._attn_implementation = "flash_attention_2"
    flash_class = getattr(ml, {"llama": "LlamaFlashAttention2", "qwen2": "Qwen2FlashAttention2"}[ARCH], None)
    for layer in model.model.layers:
        if flash_class is not None:  # up to transformers 4.47; later versions dispatch on the config
            layer.self_attn.__class__ = flash_class
            layer.self_attn._flash_attn_uses_top_left_mask = False
    return model


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


def generate_kwargs(ids):
    """Greedy generate() as the papers' code calls it: with an all-ones attention mask (SentenceKV's
    run_ruler.py passes torch.ones_like(input_ids)). Without one, generate() infers the mask from
    pad_token_id, and a prompt token equal to it would make a padded batch, whose path builds and
    applies a 4D mask every step."""
    return dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None, attention_mask=torch.ones_like(ids))


def generate_step_seconds(attn, short=40, long=240, repeats=7):
    """Host time per decode step of Hugging Face generate() with a one-layer tiny Llama: the difference
    between two generation lengths, so prompt prefill and generate()'s setup cancel out."""
    torch.set_num_threads(1)
    model = tiny_llama(1, attn)
    ids = torch.randint(0, 128, (1, 16))
    kw = generate_kwargs(ids)

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
        if e.name.startswith("aten::") and top_level(e):
            n += 1
            k += e.name not in METADATA_OPS
    return n, k


def mark_layers(model):
    """Wraps each decoder layer's forward in a profiler range named LAYER."""
    for layer in model.model.layers:
        layer.register_forward_pre_hook(
            lambda mod, args: setattr(mod, "_range", torch.profiler.record_function("LAYER").__enter__()))
        layer.register_forward_hook(lambda mod, args, out: mod._range.__exit__(None, None, None))


def is_sync(e):
    """A top-level operator that reads a GPU value on the host (it or a nested call is
    aten::_local_scalar_dense): on a GPU the host waits there for every kernel issued before it."""
    stack = [e]
    while stack:
        x = stack.pop()
        if x.name == "aten::_local_scalar_dense":
            return True
        stack.extend(x.cpu_children)
    return False


def sync_profile(attn, steps=12):
    """Per decode step of generate() with a one-layer tiny Llama (steady-state steps: the prompt's pass
    and the last step left out), a dict of: syncs inside the layer and outside it; operators and
    kernels of the layer issued up to its first sync, that one included (before_sync); operators and
    kernels of the forward pass issued before the layer (before_layers); and generate()'s own loop
    operators issued from the step's first sync up to the forward pass (loop_before_forward)."""
    model = tiny_llama(1, attn)
    mark_layers(model)
    model.register_forward_pre_hook(
        lambda mod, args, kwargs: setattr(mod, "_range", torch.profiler.record_function("FORWARD").__enter__()), with_kwargs=True)
    model.register_forward_hook(lambda mod, args, out: mod._range.__exit__(None, None, None))
    ids = torch.randint(0, 128, (1, 16))
    kw = generate_kwargs(ids)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, **kw)
    events = prof.events()
    layers = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == "LAYER")
    forwards = sorted(e.time_range.start for e in events if e.name == "FORWARD")
    # forward_start[k]: the start of the forward pass that runs layer k
    forward_start = [max(f for f in forwards if f <= s) for s, _ in layers]
    top = sorted((e for e in events if e.name.startswith("aten::") and top_level(e)), key=lambda e: e.time_range.start)
    inside = [[] for _ in layers]  # inside[k]: layer k's top-level operators, in order
    gaps = [[] for _ in layers]    # gaps[k]: those after layer k's end, before layer k+1's start
    for e in top:
        k = sum(1 for s, _ in layers if s <= e.time_range.start) - 1
        if k >= 0:
            (inside if e.time_range.start <= layers[k][1] else gaps)[k].append(e)

    def upto_first_sync(ops):  # the operators up to the first sync, that one included (all when none)
        return ops[:next((i + 1 for i, e in enumerate(ops) if is_sync(e)), len(ops))]

    def from_first_sync(ops):  # the operators from the first sync on (none when none)
        return ops[next((i for i, e in enumerate(ops) if is_sync(e)), len(ops)):]

    def in_forward(k):  # of the operators before layer k, those of its forward pass
        return [e for e in gaps[k - 1] if e.time_range.start >= forward_start[k]]

    def loop_before_forward(k):  # generate()'s own operators from the step's first sync to the forward pass
        return [e for e in from_first_sync(gaps[k - 1]) if e.time_range.start < forward_start[k]]

    def mean(f, ks):
        return sum(f(k) for k in ks) / len(ks)

    kernels = lambda ops: sum(e.name not in METADATA_OPS for e in ops)
    steps_ = range(2, len(layers) - 1)  # layer k of a decode step, preceded by gap k-1
    return {
        "syncs_in_layer": mean(lambda k: sum(map(is_sync, inside[k])), steps_),
        "syncs_outside": mean(lambda k: sum(map(is_sync, gaps[k - 1])), steps_),
        "ops_before_sync": mean(lambda k: len(upto_first_sync(inside[k])), steps_),
        "kernels_before_sync": mean(lambda k: kernels(upto_first_sync(inside[k])), steps_),
        "ops_before_layers": mean(lambda k: len(in_forward(k)), steps_),
        "kernels_before_layers": mean(lambda k: kernels(in_forward(k)), steps_),
        "syncs_before_layers": mean(lambda k: sum(map(is_sync, in_forward(k))), steps_),
        "loop_before_forward": mean(lambda k: len(loop_before_forward(k)), steps_),
        "loop_kernels_before_forward": mean(lambda k: kernels(loop_before_forward(k)), steps_),
    }


def top_level(e):
    parent = e.cpu_parent
    while parent is not None and not parent.name.startswith("aten::"):
        parent = parent.cpu_parent
    return parent is None


def sync_sites(attn, short=4, long=12):
    """The Transformers lines that read GPU values on the host, with their count per decode step of
    generate() on a two-layer tiny Llama (the difference between two lengths): Tensor.item, bool(),
    int(), float() and tolist() are wrapped to record their caller."""
    import collections
    import traceback
    model, seen, on = tiny_llama(2, attn), collections.Counter(), [False]
    originals = {name: getattr(torch.Tensor, name) for name in ("item", "__bool__", "__int__", "__float__", "tolist", "__index__")}
    for name, orig in originals.items():
        def wrapped(self, *a, _orig=orig, **kw):
            if on[0]:
                frames = [f for f in traceback.extract_stack()[:-1] if "transformers" + "/" in f.filename.replace("\\", "/")]
                f = frames[-1] if frames else None
                seen[f"{f.filename.split('transformers/')[-1]}:{f.lineno}" if f else "?"] += 1
            return _orig(self, *a, **kw)
        setattr(torch.Tensor, name, wrapped)
    ids = torch.randint(0, 128, (1, 16))
    kw = generate_kwargs(ids)
    counts = []
    try:
        for n in (short, long):
            seen.clear()
            on[0] = True
            with torch.no_grad():
                model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
            on[0] = False
            counts.append(dict(seen))
    finally:
        for name, orig in originals.items():
            setattr(torch.Tensor, name, orig)
    a, b = counts
    return {k: (b.get(k, 0) - a.get(k, 0)) / (long - short) for k in set(a) | set(b) if b.get(k, 0) != a.get(k, 0)}


def count_generate_ops(attn, short=8, long=24):
    """Operators per decode step of generate() with a one-layer tiny Llama, the forward pass included:
    the difference between two generation lengths, so prefill and setup cancel out."""
    model = tiny_llama(1, attn)
    ids = torch.randint(0, 128, (1, 16))
    kw = generate_kwargs(ids)
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
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"])
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
    print(f"ops_per_step: {one - per_layer}           # the forward pass outside the layers: embedding, final norm, LM head, sampling")
    print(f"kernels_per_step: {k1 - kernels_per_layer}")
    print(f"dispatch_us: {us:.2f}         # host time per operator, Hugging Face's Python included")
    print(f"loop_us: {loop_us:.1f}           # host time per step of generate()'s own loop, outside the forward pass")
    print(f"# generate(): {gen_ops - per_layer:.0f} operators ({gen_kernels - kernels_per_layer:.0f} launching kernels) per step "
          f"outside the layers, its own loop included (the forward pass alone: {one - per_layer}, {k1 - kernels_per_layer})")
    print(f"# a bare aten call: {bare_us:.2f} us")
    print_syncs(a.attn)


def print_syncs(attn):
    import transformers
    p = sync_profile(attn)
    sites = "; ".join(f"{k} ({v:g} per step with 2 layers)" for k, v in sorted(sync_sites(attn).items()))
    print(f"# host-device syncs per decode step (transformers {transformers.__version__}, {attn}): "
          f"{p['syncs_in_layer']:g} per decoder layer, {p['syncs_outside']:g} outside the layers; at {sites}")
    print(f"ops_before_layers: {p['ops_before_layers']:g}     # of ops_per_step (the forward pass), those issued before the first layer")
    print(f"kernels_before_layers: {p['kernels_before_layers']:g}")
    print(f"# generate()'s own loop issues {p['loop_before_forward']:g} operators ({p['loop_kernels_before_forward']:g} launching kernels) "
          f"between the step's first sync and the forward pass (their time is in loop_us); "
          f"syncs among the forward pass's operators before the first layer: {p['syncs_before_layers']:g}")
    if p["syncs_in_layer"] > 0:
        print("sync_per_layer: true")
        print(f"ops_before_sync: {p['ops_before_sync']:g}      # of ops_per_layer, issued up to the layer's first sync, that one included")
        print(f"kernels_before_sync: {p['kernels_before_sync']:g}")


if __name__ == "__main__":
    main()
