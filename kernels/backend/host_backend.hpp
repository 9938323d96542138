// The host backends' classes: HostBackend runs every step on the reference kernels (kvsim::ref);
// HostOptimizedBackend (host_optimized_backend.cpp) derives from it and replaces the steps that have
// an optimized host kernel (kvsim::host, kernels/host/). Use the factories in backend.hpp; the classes
// are visible so that the optimized backend can fall back to the reference step by step.
#pragma once
#include "kernels/backend/backend.hpp"

namespace kvsim::kernels {

class HostBackend : public Backend {
 public:
  std::string name() const override { return "host"; }
  Where where(Step) const override { return Where::host; }
  std::unique_ptr<Backend> fork() const override { return std::make_unique<HostBackend>(); }

 protected:
  void do_obs_window_scores(const WindowScoreParams& p) const override;
  void do_pool1d(const Pool1dParams& p) const override;
  void do_chunk_sum(const ChunkSumParams& p) const override;
  std::vector<int32_t> do_topk(const TopkParams& p) const override;
  void do_quest_page_minmax(const PageMinmaxParams& p) const override;
  void do_quest_page_bound(const PageBoundParams& p) const override;
  std::vector<int32_t> do_quest_select_pages(const PageSelectParams& p) const override;
  void do_gather_attention(const GatherAttentionParams& p) const override;
  void do_biased_attention(const BiasedAttentionParams& p) const override;
  void do_merge_state(const MergeStateParams& p) const override;
  int do_qcivf_build(const QcivfBuildParams& p) const override;
  std::vector<int32_t> do_ctkvr_recall(const CtkvrRecallParams& p) const override;
  std::vector<int32_t> do_ctkvr_rerank(const CtkvrRerankParams& p) const override;
  void do_score_gemv(const ScoreGemvParams& p) const override;
  void do_score_gemm(const ScoreGemmParams& p) const override;
  void do_segment_mean(const SegmentMeanParams& p) const override;
  std::vector<int32_t> do_dedup(const DedupParams& p) const override;
  ChessKept do_chess_select(const ChessSelectParams& p) const override;
  void do_chess_page_vectors(const PageVectorsParams& p) const override;
  void do_tail_mean(const TailMeanParams& p) const override;
  void do_group_mean(const GroupMeanParams& p) const override;
  std::vector<int32_t> do_chess_context_pages(const ContextPagesParams& p) const override;
  std::vector<float> do_pca_projection(const PcaParams& p) const override;
  ref::LowRankFactors do_truncated_svd(const SvdParams& p) const override;
  std::vector<int32_t> do_position_ids(const PositionIdsParams& p) const override;
  void do_sekv_summaries(const SekvSummaryParams& p) const override;
  void do_sekv_routing(const SekvRoutingParams& p) const override;
  std::vector<int32_t> do_sekv_zoom(const SekvZoomParams& p) const override;
};

class HostOptimizedBackend final : public HostBackend {
 public:
  HostOptimizedBackend();
  ~HostOptimizedBackend() override;
  std::string name() const override { return "host (optimized)"; }
  std::string kernels(Step s) const override;
  std::unique_ptr<Backend> fork() const override { return std::make_unique<HostOptimizedBackend>(); }

 protected:
  void do_obs_window_scores(const WindowScoreParams& p) const override;
  std::vector<int32_t> do_topk(const TopkParams& p) const override;
  void do_quest_page_bound(const PageBoundParams& p) const override;
  std::vector<int32_t> do_quest_select_pages(const PageSelectParams& p) const override;
  void do_gather_attention(const GatherAttentionParams& p) const override;
  void do_biased_attention(const BiasedAttentionParams& p) const override;
  int do_qcivf_build(const QcivfBuildParams& p) const override;
  std::vector<int32_t> do_ctkvr_recall(const CtkvrRecallParams& p) const override;
  std::vector<int32_t> do_dedup(const DedupParams& p) const override;
  ChessKept do_chess_select(const ChessSelectParams& p) const override;
  std::vector<int32_t> do_ctkvr_rerank(const CtkvrRerankParams& p) const override;
  void do_score_gemv(const ScoreGemvParams& p) const override;
  void do_score_gemm(const ScoreGemmParams& p) const override;
  std::vector<float> do_pca_projection(const PcaParams& p) const override;
  ref::LowRankFactors do_truncated_svd(const SvdParams& p) const override;

 private:
  // Observation-window scores by content (host_optimized_backend.cpp): SnapKV, ChunkKV and SentenceKV score the
  // same prompt with the same window at their defaults, and a replay of all three computes it once.
  struct WindowMemo;
  std::unique_ptr<WindowMemo> memo_;
};

}  // namespace kvsim::kernels
