// Paged decode attention over a CSR page table, exactly FlashInfer's BatchDecodeWithPagedKVCache
// (host reference). The cache holds pages in FlashInfer's NHD layout:
//   k_pages, v_pages: [num_pages, page_size, num_kv_heads, head_dim]
// Request b owns pages indices[indptr[b] .. indptr[b+1]) in order; every page is full except the last,
// which holds last_page_len[b] tokens (1..page_size). A request with no pages attends to nothing
// (out = 0, lse = -inf).
// Queries q[B, num_qo_heads, head_dim]; query head h reads KV head h / (num_qo_heads / num_kv_heads)
// (GQA); out[B, num_qo_heads, head_dim], lse[B, num_qo_heads] (natural log, see attention.hpp).
//
// Sparse paged attention (CHESS's zero-copy selection) is the same call with a rewritten `indices`
// list: the selected page ids of one request. sparse_paged_decode_attention() is that, for one request.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::ref {

struct PagedKV {
  const float* k_pages = nullptr;
  const float* v_pages = nullptr;
  int64_t num_pages = 0;
  int page_size = 0;
  int num_kv_heads = 1;
  int head_dim = 0;
  // Offset of (page, slot, kv head) in either array, in floats.
  int64_t offset(int64_t page, int slot, int kv_head) const {
    return ((page * page_size + slot) * num_kv_heads + kv_head) * int64_t(head_dim);
  }
};

struct PageTable {
  std::span<const int32_t> indptr;         // [B + 1], indptr[0] = 0, non-decreasing
  std::span<const int32_t> indices;        // page ids, each in [0, num_pages)
  std::span<const int32_t> last_page_len;  // [B]
  int batch() const { return int(indptr.size()) - 1; }
};

// Throws std::invalid_argument when the table is inconsistent with the cache.
void paged_decode_attention(const float* q, int num_qo_heads, const PagedKV& kv, const PageTable& table,
                            float scale, float* out, float* lse);

// One request attending to `pages` (in the given order; all full except the last, which holds
// last_page_len tokens — pass page_size when the selection does not end with the sequence's partial
// last page). q[num_qo_heads, head_dim], out likewise, lse[num_qo_heads].
void sparse_paged_decode_attention(const float* q, int num_qo_heads, const PagedKV& kv,
                                   std::span<const int32_t> pages, int last_page_len, float scale, float* out,
                                   float* lse);

// Pages needed for n tokens, and the last page's fill (n > 0).
int64_t num_pages_for(int64_t n_tokens, int page_size);
int last_page_len_for(int64_t n_tokens, int page_size);

// Copy a contiguous single-head sequence K[n, d] into pages 0..ceil(n/page_size)-1 of an NHD buffer
// with num_kv_heads = 1 (test and replay helper). Returns the buffer.
std::vector<float> paginate(const float* X, int64_t n, int d, int page_size);

}  // namespace kvsim::ref
