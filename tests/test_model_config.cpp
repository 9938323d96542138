// Sizes derived from model shapes.
#include <gtest/gtest.h>

#include "model/deployment.hpp"
#include "test_util.hpp"

using namespace kvsim;

TEST(ModelConfig, KvBytesPerTokenIsTwoLHkvDb) {
  for (const auto& n : library_names(LibraryKind::model)) {
    SCOPED_TRACE(n);
    const ModelConfig m = test::model(n);
    for (double b : {1.0, 2.0, 4.0})
      EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(b), 2.0 * m.layers * m.kv_heads * m.head_dim * b);
  }
  // The figure everyone quotes: Llama 3 8B in bf16 holds 128 KiB of KV per token.
  EXPECT_DOUBLE_EQ(test::model("llama-3-8b").kv_bytes_per_token(2), 131072.0);
}

TEST(ModelConfig, ParameterCountsMatchPublishedSizes) {
  // Published totals (model cards): Llama 3 8B 8.03B, Llama 3.2 3B 3.21B, Qwen2 7B 7.62B, Mistral 7B 7.24B,
  // SmolLM2 135M 0.135B.
  struct Case { const char* name; double params; };
  for (Case c : {Case{"llama-3-8b", 8.03e9}, Case{"llama-3.1-8b", 8.03e9}, Case{"llama-3.2-3b", 3.21e9},
                 Case{"qwen2-7b", 7.62e9}, Case{"mistral-7b", 7.24e9}, Case{"smollm2-135m", 0.1348e9}}) {
    SCOPED_TRACE(c.name);
    EXPECT_NEAR(test::model(c.name).total_params() / c.params, 1.0, 0.01);
  }
}

TEST(Deployment, TensorParallelSplitsHeadsAndReplicatesScarceKvHeads) {
  const ModelConfig m = test::model("llama-3.1-8b");  // 32 q heads, 8 kv heads
  const GpuSpec g = test::gpu("h100-sxm");
  const HostSpec h = test::host("sapphire-rapids-2s");
  Calibration cal;
  auto dep = [&](int tp) { return make_deployment(m, g, h, cal, {.tensor_parallel = tp}); };
  EXPECT_DOUBLE_EQ(dep(2).kv_bytes_per_token(), m.kv_bytes_per_token(2) / 2);
  EXPECT_DOUBLE_EQ(dep(8).hkv, 1.0);
  EXPECT_DOUBLE_EQ(dep(16).hkv, 1.0);  // 8 KV heads over 16 GPUs: each GPU keeps one (replicated)
  EXPECT_NEAR(dep(4).weight_bytes(), dep(1).weight_bytes() / 4, dep(1).weight_bytes() * 1e-3);
  EXPECT_DOUBLE_EQ(dep(1).weight_bytes(), m.total_params() * 2);
  // At tp 16 each GPU holds one whole KV head (1/8 of K and V, not 1/16): 2 h d more per layer than
  // an even split.
  const double even_split = (m.total_params() - (2.0 * m.hidden * m.layers + m.hidden)) / 16 + 2.0 * m.hidden * m.layers + m.hidden;
  const double kv_extra = m.layers * 2.0 * m.hidden * m.head_dim * (1.0 - 8.0 / 16);
  EXPECT_NEAR(dep(16).weight_bytes(), (even_split + kv_extra) * 2, 1.0);
}
