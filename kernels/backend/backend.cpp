#include "kernels/backend/backend.hpp"

namespace kvsim::kernels {

const char* step_name(Step s) {
  switch (s) {
    case Step::window_scores: return "obs_window_scores";
    case Step::pool1d: return "pool1d";
    case Step::chunk_sum: return "chunk_sum";
    case Step::topk: return "topk";
    case Step::page_minmax: return "quest_page_minmax";
    case Step::page_bound: return "quest_page_bound";
    case Step::page_select: return "quest_select_pages";
    case Step::gather_attention: return "gather_attention";
    case Step::biased_attention: return "biased_attention";
    case Step::merge_state: return "merge_state";
    case Step::qcivf_build: return "qcivf_build";
    case Step::ctkvr_recall: return "ctkvr_recall";
    case Step::ctkvr_rerank: return "ctkvr_rerank";
    case Step::score_gemv: return "score_gemv";
    case Step::segment_mean: return "segment_mean";
    case Step::dedup: return "dedup";
    case Step::chess_select: return "chess_hierarchical_select";
    case Step::page_vectors: return "chess_page_vectors";
    case Step::tail_mean: return "tail_mean";
    case Step::group_mean: return "group_mean";
    case Step::context_pages: return "chess_context_pages";
    case Step::pca_projection: return "pca_projection";
    case Step::truncated_svd: return "truncated_svd";
    case Step::score_gemm: return "score_gemm";
    case Step::position_ids: return "position_ids";
    case Step::sekv_summaries: return "sekv_summaries";
    case Step::sekv_routing: return "sekv_routing";
    case Step::sekv_zoom: return "sekv_zoom";
  }
  return "?";
}

const char* where_name(Where w) { return w == Where::device ? "device" : "host"; }

std::string Backend::kernels(Step s) const {
  return (where(s) == Where::device ? "" : "kvsim::ref::") + std::string(step_name(s));
}

void StepLog::record(Step s, Where w) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[s];
  e.where = w;
  ++e.calls;
}

std::map<Step, StepLog::Entry> StepLog::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

}  // namespace kvsim::kernels
