#include "kernels/reference/paged.hpp"

#include <stdexcept>
#include <string>

#include "kernels/reference/hd.hpp"

namespace kvsim::ref {

namespace {
void fail(const std::string& what) { throw std::invalid_argument("paged_decode_attention: " + what); }

// Attention of one query row over one request's pages of one KV head.
float attend_pages(const float* q, const PagedKV& kv, int kv_head, const int32_t* pages, int64_t np,
                   int last_len, float scale, float* out) {
  const int d = kv.head_dim;
  for (int c = 0; c < d; ++c) out[c] = 0.f;
  hd::OnlineSoftmax st;
  for (int64_t j = 0; j < np; ++j) {
    const int len = j + 1 == np ? last_len : kv.page_size;
    for (int t = 0; t < len; ++t) {
      const int64_t off = kv.offset(pages[j], t, kv_head);
      float rescale, p;
      st.push(scale * hd::dot(q, kv.k_pages + off, d), rescale, p);
      const float* v = kv.v_pages + off;
      for (int c = 0; c < d; ++c) out[c] = out[c] * rescale + p * v[c];
    }
  }
  const float inv = st.inv_l();
  for (int c = 0; c < d; ++c) out[c] *= inv;
  return st.lse();
}

void check_cache(const PagedKV& kv, int num_qo_heads) {
  if (kv.page_size <= 0 || kv.head_dim <= 0 || kv.num_kv_heads <= 0) fail("bad cache shape");
  if (num_qo_heads <= 0 || num_qo_heads % kv.num_kv_heads != 0) fail("num_qo_heads not a multiple of num_kv_heads");
}
void check_pages(const PagedKV& kv, const int32_t* pages, int64_t np, int last_len) {
  for (int64_t j = 0; j < np; ++j)
    if (pages[j] < 0 || pages[j] >= kv.num_pages) fail("page id " + std::to_string(pages[j]) + " out of range");
  if (np > 0 && (last_len < 1 || last_len > kv.page_size)) fail("last_page_len outside [1, page_size]");
}
}  // namespace

void paged_decode_attention(const float* q, int num_qo_heads, const PagedKV& kv, const PageTable& table,
                            float scale, float* out, float* lse) {
  check_cache(kv, num_qo_heads);
  const int B = table.batch();
  if (B < 0 || int(table.last_page_len.size()) != B) fail("indptr/last_page_len sizes disagree");
  if (table.indptr[0] != 0 || size_t(table.indptr[B]) > table.indices.size()) fail("indptr does not fit indices");
  const int group = num_qo_heads / kv.num_kv_heads;
  const int d = kv.head_dim;
  for (int b = 0; b < B; ++b) {
    const int32_t beg = table.indptr[b], end = table.indptr[b + 1];
    if (end < beg) fail("indptr decreases");
    const int32_t* pages = table.indices.data() + beg;
    check_pages(kv, pages, end - beg, table.last_page_len[b]);
    for (int h = 0; h < num_qo_heads; ++h) {
      const int64_t row = int64_t(b) * num_qo_heads + h;
      lse[row] = attend_pages(q + row * d, kv, h / group, pages, end - beg, table.last_page_len[b], scale,
                              out + row * d);
    }
  }
}

void sparse_paged_decode_attention(const float* q, int num_qo_heads, const PagedKV& kv,
                                   std::span<const int32_t> pages, int last_page_len, float scale, float* out,
                                   float* lse) {
  const int32_t indptr[2] = {0, int32_t(pages.size())};
  const int32_t last[1] = {last_page_len};
  paged_decode_attention(q, num_qo_heads, kv, PageTable{indptr, pages, last}, scale, out, lse);
}

int64_t num_pages_for(int64_t n_tokens, int page_size) { return (n_tokens + page_size - 1) / page_size; }
int last_page_len_for(int64_t n_tokens, int page_size) { return int(n_tokens - (num_pages_for(n_tokens, page_size) - 1) * page_size); }

std::vector<float> paginate(const float* X, int64_t n, int d, int page_size) {
  std::vector<float> buf(size_t(num_pages_for(n, page_size) * page_size * d), 0.f);
  for (int64_t i = 0; i < n * d; ++i) buf[size_t(i)] = X[i];  // NHD with one head is the contiguous layout
  return buf;
}

}  // namespace kvsim::ref
