"""CTKVR's CPU side written with framework operators (PyTorch on the CPU): kvsim's reading of how the
paper's implementation runs Algorithm 2 lines 5-9 (seed 004), measured by tools/measure/torch_host_ops.py.

Why framework operators. §3.2 names the custom code of the system: "a carefully optimized custom CUDA
kernel (~200 LoC C++) designed specifically for efficient index deduplication and token retrieval (line 4
in Algorithm 2)" and CUDA multi-streaming. Nothing on the CPU side is called custom, so kvsim reads the
rerank (lines 5-6), the gathers (7-8) and the sparse attention (9) as stock PyTorch CPU operators, batched
over the sequences and KV heads of one layer, one operator sequence per layer, on PyTorch's intra-op
threads (all cores by default). The KV offloaded to DRAM keeps the model's dtype (bf16): Algorithm 1
line 5 moves K and V as they are. No public code exists to check this against (docs/reproductions.md,
ctkvr).

Shapes (B sequences, g KV heads, h/g queries per KV head, d head dim):
  q        (B, g, h/g, d)   bf16, copied from the GPU with the recalled ids
  K, V     (B, g, n, d)     bf16, the offloaded tokens in DRAM
  ids      (B, g, L_recall) int32, the deduplicated recalled key ids (line 4, from the GPU)
"""
import math

import torch


def rerank(q, K, ids, rho_prime):
    """Lines 5-6: A'_kv = max over the group of softmax(q . K_recall); the top rho' of it. Returns the
    chosen token ids, (B, g, rho')."""
    d = q.shape[-1]
    ids = ids.long()  # int32 from the GPU; torch.gather takes int64
    k_recall = torch.gather(K, 2, ids.unsqueeze(-1).expand(-1, -1, -1, d))
    scores = torch.matmul(q, k_recall.transpose(-1, -2)) * (1.0 / math.sqrt(d))
    a = torch.softmax(scores.float(), dim=-1).amax(dim=2)
    top = torch.topk(a, rho_prime, dim=-1).indices
    return torch.gather(ids, 2, top)


def attention(q, K, V, chosen):
    """Lines 7-9: gather the chosen tokens' K and V and attend over them. Returns the partial output and
    its log-sum-exp in fp32 (what Merge, line 11, needs on the GPU)."""
    d = q.shape[-1]
    idx = chosen.unsqueeze(-1).expand(-1, -1, -1, d)
    k_sparse = torch.gather(K, 2, idx)
    v_sparse = torch.gather(V, 2, idx)
    s = torch.matmul(q, k_sparse.transpose(-1, -2)).float() * (1.0 / math.sqrt(d))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - lse)
    o = torch.matmul(p.to(v_sparse.dtype), v_sparse).float()
    return o, lse


# The phases of kvsim's cost model (policies/ctkvr/cost.cpp) and the bytes it charges each on the DRAM
# ceiling, per layer: one key row per recalled id for the rerank, a key and a value row per chosen token
# for the attention. The measured efficiency is those bytes over the measured time's bandwidth part.
def phases(B, g, group, d, n, l_recall, rho_prime, dtype=torch.bfloat16, seed=0):
    """Inputs for one layer and the phase functions with the bytes kvsim's cost model charges."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, g, group, d, generator=gen).to(dtype)
    K = torch.randn(B, g, n, d, generator=gen).to(dtype)
    V = torch.randn(B, g, n, d, generator=gen).to(dtype)
    ids = torch.stack([torch.randperm(n, generator=gen)[:l_recall] for _ in range(B * g)]).view(B, g, l_recall)
    ids = ids.to(torch.int32)
    chosen = rerank(q, K, ids, rho_prime)
    row = d * torch.finfo(dtype).bits // 8
    return {
        "cpu_rerank": (lambda: rerank(q, K, ids, rho_prime), B * g * l_recall * row),
        "cpu_attention": (lambda: attention(q, K, V, chosen), B * g * rho_prime * 2 * row),
    }
