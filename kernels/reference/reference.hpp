// kvsim::ref — the plain, obviously-correct host version of every phase kernel: the oracle for tests
// and what trace replay calls for all selection math. float32, row-major, explicit sizes.
//   PhaseKind::attention    attention.hpp (dense, GQA, token-gather, biased), paged.hpp (paged, sparse paged)
//   PhaseKind::host_kernel  merge.hpp (partial-softmax merge), ivf.hpp (CTKVR rerank), attention.hpp
//   PhaseKind::score        score.hpp (GEMV/GEMM, cosine), quest.hpp (page bound), window.hpp (obs window)
//   PhaseKind::select       select.hpp (top-k, quantile, CHESS hierarchical masking), gather.hpp (dedup)
//   PhaseKind::gather       gather.hpp (gather/scatter rows into staging)
//   PhaseKind::build        pooling.hpp (means), lowrank.hpp (SVD), ivf.hpp (qcIVF), quest.hpp (min/max)
//   PhaseKind::reconstruct  lowrank.hpp (U Σ Vᵀ)
#pragma once
#include "kernels/reference/attention.hpp"
#include "kernels/reference/gather.hpp"
#include "kernels/reference/ivf.hpp"
#include "kernels/reference/lowrank.hpp"
#include "kernels/reference/merge.hpp"
#include "kernels/reference/paged.hpp"
#include "kernels/reference/pooling.hpp"
#include "kernels/reference/quest.hpp"
#include "kernels/reference/score.hpp"
#include "kernels/reference/select.hpp"
#include "kernels/reference/window.hpp"
