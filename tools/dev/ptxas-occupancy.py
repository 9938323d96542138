#!/usr/bin/env python3
"""Registers, spills and shared memory of every optimized CUDA kernel from `nvcc -Xptxas -v`, and the
theoretical occupancy they give on sm_80 (A100) and sm_90 (H100), as a Markdown table
(kernels/optimized/README.md, "Registers, shared memory and occupancy", holds its output).

    tools/dev/ptxas-occupancy.py [--nvcc /usr/local/cuda/bin/nvcc] [--arch 80 --arch 90] [FILE.cu ...]
    nvcc ... -Xptxas -v 2>&1 | tools/dev/ptxas-occupancy.py --stdin --arch 90

Without files it compiles kernels/optimized/*.cu one at a time, as CMake's kvsim_kernels does (the
repository root on the include path, -DKVSIM_HAVE_CUDA=1, -O3, C++17), once per architecture.

ptxas does not know the launch configuration, so the block size and the dynamic shared memory of each
kernel come from LAUNCH below (what its launcher passes; for a size-dependent amount, the case named
there). Occupancy per SM, as CUDA's occupancy calculator computes it:
  registers: ceil(regs · 32 / 256) · 256 per warp (allocation unit 256), 65536 per SM, 65536 per block;
  threads: 2048 per SM (64 warps); blocks: 32 per SM;
  shared memory: static + dynamic + 1 KiB the runtime reserves per block, in 128-byte units, against
  164 KiB per SM on sm_80 and 228 KiB on sm_90 (the largest carveout);
blocks per SM = the least of the four, occupancy = its warps / 64.
"""
import argparse
import math
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Per architecture: registers per SM, max threads per SM, max blocks per SM, shared memory per SM (bytes).
ARCH = {
    80: dict(regs=65536, threads=2048, blocks=32, smem=164 * 1024),
    90: dict(regs=65536, threads=2048, blocks=32, smem=228 * 1024),
}
REG_UNIT = 256  # registers are allocated per warp in units of 256
SMEM_UNIT = 128
SMEM_RESERVED = 1024  # per block, sm_80 and later

# Kernel (demangled name, without namespaces and parameters) -> (threads per block, dynamic shared
# bytes, the configuration the dynamic amount is for).
LAUNCH = {
    "split_kv_decode_kernel": (128, 0, ""),
    "merge_splits_kernel": (128, 0, ""),
    "topk_kernel": (256, 32768, "rank order, k > 2048 (32 KiB sort buffer); index order: none"),
    "select_pass_kernel": (256, 0, ""),
    "count_kept_kernel": (256, 0, ""),
    "write_kept_kernel": (256, 0, ""),
    "sort_tiles_kernel": (1024, 32768, "one 4096-word tile of a split row's survivors"),
    "merge_kernel": (256, 32768, "2048 input and 2048 output words of a merge round"),
    "copy_runs_kernel": (256, 0, ""),
    "centroid_cosine_kernel": (256, 0, ""),
    "recall_kernel": (1024, 32768, "top-C' sort buffer, then the dedup bitmap window"),
    "summary_scores_kernel": (256, 0, ""),
    "chess_levels_kernel": (1024, 1152, "kept marks of G + C = 1024 + 8192 (P = 65536, N_c = N_g = 8)"),
    # The replay's steps (kernels/optimized/README.md, "The rest of the replay's steps").
    "id_range_kernel": (256, 0, ""), "bitmap_mark_kernel": (256, 0, ""), "bitmap_compact_kernel": (256, 0, ""),
    "position_ids_kernel": (256, 0, ""), "exact_scores_kernel": (256, 0, ""),
    "segment_mean_kernel": (256, 0, ""), "page_mean_kernel": (256, 0, ""),
    "window_row_stats_kernel": (256, 0, ""), "window_scores_kernel": (256, 0, ""), "pool1d_kernel": (256, 0, ""),
    "chunk_sum_kernel": (256, 0, ""), "page_minmax_kernel": (256, 0, ""), "page_bound_kernel": (256, 0, ""),
    "last_page_kernel": (1, 0, ""), "biased_attention_kernel": (128, 0, ""), "merge_state_kernel": (128, 0, ""),
    "softmax_rows_kernel": (256, 0, ""), "max_rows_kernel": (256, 0, ""), "gather_rows_kernel": (256, 0, ""),
    "map_ids_kernel": (256, 0, ""), "column_mean_kernel": (256, 0, ""), "covariance_kernel": (256, 0, ""),
    "pca_eigen_kernel": (1, 0, ""), "span_means_kernel": (256, 0, ""), "span_summary_kernel": (256, 0, ""),
    "query_projection_kernel": (256, 0, ""), "routing_gate_kernel": (256, 0, ""),
    "slice_state_kernel": (256, 0, ""), "row_result_kernel": (32, 0, ""),
    "zoom_candidates_kernel": (256, 0, ""), "zoom_budget_kernel": (1024, 0, ""), "zoom_fused_kernel": (1024, 0, ""),
    "reconstruct_kernel": (256, 0, ""), "route_gates_kernel": (256, 0, ""), "group_scores_kernel": (256, 0, ""), "span_svd_kernel": (1, 0, ""),
}

ENTRY = re.compile(r"Compiling entry function '([^']+)' for 'sm_(\d+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def demangle(names):
    if not names:
        return {}
    tool = "c++filt"
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def short(demangled):
    """split_kv_decode_kernel<8> from void kvsim::opt::cuda::(anonymous namespace)::split_kv_decode_kernel<8>(...)."""
    name = demangled.removeprefix("void ").replace("(anonymous namespace)::", "")
    name = name.split("(", 1)[0]
    head, _, targs = name.partition("<")
    return head.rsplit("::", 1)[-1] + ("<" + targs if targs else "")


def parse(text):
    """[(mangled, arch, regs, stack, spill_st, spill_ld, smem)] from ptxas -v output."""
    rows, cur = [], None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = dict(name=m.group(1), arch=int(m.group(2)), stack=0, spill_st=0, spill_ld=0)
            continue
        if cur is None:
            continue
        m = FRAME.search(line)
        if m:
            cur.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            continue
        m = USED.search(line)
        if m:
            sm = SMEM.search(line)
            cur.update(regs=int(m.group(1)), smem=int(sm.group(1)) if sm else 0)
            rows.append(cur)
            cur = None
    return rows


def occupancy(arch, regs, threads, smem):
    a = ARCH[arch]
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(regs * 32 / REG_UNIT) * REG_UNIT
    limits = {
        "threads": a["threads"] // (warps * 32),
        "blocks": a["blocks"],
        "registers": (a["regs"] // per_warp) // warps if per_warp else a["blocks"],
        "shared": a["smem"] // (math.ceil((smem + SMEM_RESERVED) / SMEM_UNIT) * SMEM_UNIT),
    }
    blocks = min(limits.values())
    limiter = min(limits, key=lambda k: limits[k])
    return blocks, blocks * warps / 64, limiter


def compile_all(nvcc, archs, files):
    text = []
    for f in files:
        for arch in archs:
            cmd = [nvcc, "-DKVSIM_HAVE_CUDA=1", f"-I{ROOT}", "-O3", "-std=c++17",
                   f"--generate-code=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v", "-c", str(f),
                   "-o", "/dev/null"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"nvcc failed on {f} (sm_{arch}):\n{r.stderr}")
            text.append(r.stderr + r.stdout)
    return "\n".join(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--arch", type=int, action="append", choices=sorted(ARCH))
    ap.add_argument("--stdin", action="store_true", help="parse ptxas -v output from stdin instead of compiling")
    ap.add_argument("files", nargs="*", type=pathlib.Path)
    args = ap.parse_args()
    archs = args.arch or sorted(ARCH)
    if args.stdin:
        text = sys.stdin.read()
    else:
        files = args.files or sorted((ROOT / "kernels" / "optimized").glob("*.cu"))
        text = compile_all(args.nvcc, archs, files)
    rows = [r for r in parse(text) if r["arch"] in archs]
    names = demangle(sorted({r["name"] for r in rows}))
    by_kernel = {}
    for r in rows:
        by_kernel.setdefault(short(names[r["name"]]), {})[r["arch"]] = r
    head = "| kernel | threads | dyn. smem | " + " | ".join(
        f"sm_{a} regs | spills | static smem | blocks/SM | occupancy (limit)" for a in archs) + " |"
    print(head)
    print("|" + "---|" * (3 + 5 * len(archs)))
    notes = []
    for k in sorted(by_kernel):
        base = k.split("<", 1)[0]
        threads, dyn, note = LAUNCH.get(base, (None, 0, ""))
        if threads is None:  # a kernel added since: its registers still, no occupancy
            note = "no launch configuration in tools/dev/ptxas-occupancy.py's LAUNCH, so no occupancy"
        if note and base not in [n[0] for n in notes]:
            notes.append((base, note))
        cells = [k, str(threads or "?"), f"{dyn}"]
        for a in archs:
            r = by_kernel[k].get(a)
            if r is None:
                cells += ["-"] * 5
                continue
            smem = r["smem"] + dyn
            blocks, occ, lim = occupancy(a, r["regs"], threads, smem) if threads else ("-", None, None)
            spills = "none" if r["spill_st"] + r["spill_ld"] + r["stack"] == 0 else \
                f"{r['spill_st']}/{r['spill_ld']} B, frame {r['stack']} B"
            cells += [str(r["regs"]), spills, str(r["smem"]), str(blocks), f"{occ:.0%} ({lim})" if occ is not None else "-"]
        print("| " + " | ".join(cells) + " |")
    for base, note in notes:
        print(f"\n`{base}` dynamic shared memory: {note}.")


if __name__ == "__main__":
    main()
