#include "tools/kvsim/calibrate_cmd.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/format.hpp"
#include "validate/published.hpp"
#include "model/library.hpp"

namespace kvsim {

struct CalibrateCommand {
  CLI::App* cmd = nullptr;
  CLI::App* published = nullptr;
  std::string measurements, out_dir, report, errors_out;
};

CalibrateCommand* add_calibrate_command(CLI::App& app) {
  static CalibrateCommand c;
  c.cmd = app.add_subcommand("calibrate", "fit calibration files from measurements (see also `kvsim validate`)");
  c.cmd->require_subcommand(1);
  c.published = c.cmd->add_subcommand(
      "published", "GPU efficiency curves from kernel measurements others published; one file per library GPU");
  c.published->add_option("--measurements", c.measurements,
                          "the measurements (default: scenarios/measurements/gpu-published.yaml)");
  c.published->add_option("--out-dir", c.out_dir,
                          "where to write <gpu>-published.yaml (default: the library's calibration folder)");
  c.published->add_option("--report", c.report, "also write the Markdown report (docs/validation/gpu-published.md)");
  c.published->add_option("--errors-out", c.errors_out,
                          "where to write the pooled held-out errors the plan's ranges use (default: the library's "
                          "measurements/published-curve-errors.yaml, or beside --out-dir's files)");
  return &c;
}

namespace {

// The generated part of the report ends at this line; what follows it is written by hand (the history
// of the data, what changed and why) and kept when the report is written again.
const char* const kGeneratedEnd = "<!-- end of the part written by `kvsim calibrate published`; below is written by hand -->";

std::string report_preamble(const std::string& command) {
  return "# GPU efficiencies from published kernel measurements\n\n"
         "kvsim has no GPU. Its GPU-side efficiencies come from kernel-level measurements that others published "
         "for real GPUs (`scenarios/measurements/gpu-published.yaml`, each point with its exact configuration, "
         "source and how it was verified: [gpu-published-sources.md](gpu-published-sources.md)). End-to-end "
         "results of papers are never fitted; they are what `kvsim reproduce` checks the model against.\n\n"
         "Each point is an efficiency on one ceiling: the achieved rate over the GPU's datasheet rate "
         "(`scenarios/hardware/<gpu>.yaml`), or the fraction the source published. Decode attention moves "
         "B·n·(K+V row) + 2·B·Hq·d·b bytes (q in, o out); an MLA point (`attention: mla`, FlashMLA and FlashInfer's "
         "MLA) moves one latent row of d = 576 elements per token (K and V share it; V is its first dv = 512) and "
         "B·Hq·(d + dv)·b for q and o: B·n·576·b + B·Hq·1088·b per layer, as those benchmarks count it. Per GPU and "
         "curve the fit is e(x) = e_max x / (x + x_half), weighted least squares in log e. *Fit error*: the median "
         "of |e_fit / e_measured - 1|, the relative error of the predicted kernel time. *Held-out error*: every "
         "third interior point (in x order) is left out of a second fit and predicted by it. Library GPUs "
         "with no points of their own for a curve borrow the curve of a GPU of the same architecture (a GPU outside the "
         "library lends only where its points state its architecture and are fractions of its own peak; a donor resting "
         "on verified points is preferred). A `gemm` point is fitted on the HBM ceiling when its arithmetic intensity is "
         "below the GPU's ridge (tensor peak / HBM bandwidth: decode-size products of a few tokens) and on the tensor "
         "ceiling above it (prefill-size products).\n\n"
         "**Unverified points.** A point whose `verified:` starts with \"no\" could not be checked against its "
         "source (a value read off a chart image or a PDF the tools could not open). It is fitted at weight " +
         fmt("%g", validate::kUnverifiedWeight) +
         " instead of 1: ten unverified readings count as one checked point, so a few of them cannot decide a curve "
         "that has checked points, yet they still give a curve its shape where nothing checked exists. While the verified points make a curve on their own (at least " +
         std::to_string(validate::kMinCurvePoints) +
         " points at two or more x), the fit and held-out errors are judged on them alone. A curve they cannot make is "
         "still fitted, from every point, and flagged *rests on unverified readings*: in the tables below, in the "
         "calibration file's `description` (which `kvsim plan` prints) and in the curve's `source`. The rule was "
         "fixed before any paper comparison was looked at. A point read off a chart but verified (its value found "
         "in the source's text) keeps weight 1: verification, not the medium, is what the weight is about.\n\n"
         "**Efficiencies above 1.** A point whose achieved rate exceeds its ceiling is a data error, in the point "
         "or in the ceiling: it is left out and listed with both rates, never clamped to 1.\n\n"
         "**Which GEMM points are in the data** (rule fixed for issue 27 before any new point's effect on a fit, plan "
         "or reproduction was looked at): a `gemm` or `gemv` point is one dense fp16/bf16 matrix product (cuBLAS or "
         "cuBLASLt, directly or through torch, or CUTLASS) timed on its own, with M, N, K and dtype stated by the "
         "source or by its own script and command; the GPU is named in the same thread, file or repository (a form "
         "factor the source does not state is pinned only by the product string, e.g. \"H100 80GB HBM3\" = SXM5, or "
         "for an H100 by an implied bandwidth or rate above the PCIe card's datasheet); the number is text in the "
         "source, not read off a chart. Every row of such a table on a library GPU is taken (the fp16/bf16 baseline "
         "column, every M and shape visible), except rows under 20 us per call when the harness times eager calls from "
         "the host without CUDA graphs (per-call launch and dispatch overhead, ~5-10 us, is then part of the time) and "
         "values reported as the maximum over a sweep of shapes (a shape picked because it was fast). No point is left "
         "out or chosen for what it does to a fit, a plan or a reproduction; measurements that disagree are all kept. "
         "Details and the sources looked at and not used: [gpu-published-sources.md](gpu-published-sources.md).\n\n"
         "**Which selection-kernel points are in the data** (rule fixed for issue 27 item 3 before any fit was looked "
         "at): a `topk` point is one top-k over rows of fp32 scores timed on its own, with rows, n and k stated; it "
         "moves rows·(2n + k)·4 bytes, as the planner's `select` phases count it (each row's scores read twice, its k "
         "indices written), so a fitted curve gives the measured time back on such a phase. A `gather` point is one "
         "kernel that gathers `bytes` of rows of `run_bytes` each by index inside HBM into a contiguous buffer; it "
         "moves 2·bytes (read, then written), as the planner's `gather` phases count it, and its curve is against the "
         "run length. The GPU is named in the source's text and the number is text; every row of a table used is "
         "taken, with every kernel column of it.\n\n"
         "**Which prefill-attention points are in the data** (rule fixed for issue 27 item 3 before any point was "
         "added or its effect looked at): a `prefill_attention` point is one forward attention kernel over whole "
         "sequences (FlashAttention-2/3, cuDNN, FlashInfer or Triton prefill) timed on its own on GPU, with batch, "
         "sequence length, query heads, head_dim, causal or not and dtype stated; the GPU is named in the same "
         "thread (an H100 whose form factor is not stated is recorded as `h100-sxm` but `verified: no`, since the "
         "ceiling its efficiency is a fraction of is then unknown: weight 0.1, and its curve is flagged); the number is text. Every row of a table used is taken, with every "
         "kernel column. Its efficiency is on the tensor ceiling: the FLOPs the model's `prefill_attention` phase "
         "counts for that shape, B·Hq·scores·(4d + 5) with s(s + 1)/2 scores per head when causal, over the time, "
         "over the dtype's tensor peak; its curve is against the sequence length (the phase's `context_tokens`, "
         "the prompt). The model's prefill attention is causal and runs at the 16-bit activation peak, so only "
         "causal fp16/bf16 points are fitted; non-causal and fp8 rows are kept in the data and listed under *Not "
         "fitted*.\n\n"
         "**Which norm points are in the data** (rule fixed for issue 27 item 3 before any point was added or its "
         "effect looked at): an `rmsnorm` point is one RMSNorm forward (with or without the fused residual add) timed "
         "on its own on GPU, with rows, hidden size and dtype stated; the GPU is named in the source (a product "
         "string such as \"NVIDIA H100 NVL\" names the library GPU); the number is text. It moves rows·hidden·2·b "
         "bytes (x read, y written), rows·hidden·4·b with the residual add, as the model's `norm` and `prefill_norm` "
         "phases count one norm, and its curve is `elementwise` on the HBM ceiling against those bytes. Every row and "
         "kernel column of a table used is taken; a column that times an eager module of several kernels (e.g. "
         "HuggingFace's LlamaRMSNorm) is kept in the data and listed under *Not fitted*, because the model's norm is "
         "one fused kernel per norm.\n\n"
         "Re-run with:\n\n    " + command + " --report docs/validation/gpu-published.md\n\n## Fits\n\n";
}

// The report: the generated part, then whatever followed the generated part in the file already there.
void write_report(const std::string& path, const std::string& generated) {
  std::string kept;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string old = buf.str();
    const auto at = old.find(kGeneratedEnd);
    if (at != std::string::npos) kept = old.substr(at + std::string(kGeneratedEnd).size());
  }
  write_file_atomic(path, generated + "\n" + kGeneratedEnd + (kept.empty() ? "\n" : kept));
}

}  // namespace

int run_calibrate_command(CalibrateCommand& c, int argc, char** argv) {
  if (!c.cmd->parsed()) return -1;
  (void)argc, (void)argv;
  // The command that re-creates the files (the output folder and report path do not change them).
  const std::string command =
      "kvsim calibrate published" + (c.measurements.empty() ? std::string() : " --measurements " + c.measurements);
  const std::string data = c.measurements.empty() ? library_dir() + "/measurements/gpu-published.yaml" : c.measurements;
  const std::string dir = c.out_dir.empty() ? library_dir() + "/calibration" : c.out_dir;
  const auto points = validate::load_published(data);
  std::vector<GpuSpec> gpus;
  for (const std::string& n : library_names(LibraryKind::hardware))
    gpus.push_back(load_gpu_file(resolve(LibraryKind::hardware, n, "command line", 0, "hardware")));
  const validate::PublishedFit fit = validate::fit_published(points, gpus);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string rel = std::filesystem::path(data).filename().string();
  for (const auto& g : fit.gpus)
    write_file_atomic(dir + "/" + g.gpu + "-published.yaml",
                      validate::published_calibration_yaml(g, "scenarios/measurements/" + rel, command));
  // Beside the library's measurements, or beside the calibration files when they go elsewhere.
  const std::string errors = !c.errors_out.empty() ? c.errors_out
                             : c.out_dir.empty()   ? library_dir() + "/measurements/published-curve-errors.yaml"
                                                   : dir + "/published-curve-errors.yaml";
  write_file_atomic(errors, validate::published_curve_errors_yaml(fit, command));
  const std::string tables = validate::published_report_markdown(fit, points);
  if (!c.report.empty()) write_report(c.report, report_preamble(command) + tables);
  std::printf("%s", tables.c_str());
  int unverified = 0, flagged = 0;
  for (const auto& f : fit.fits) unverified += f.unverified_points, flagged += f.rests_on_unverified;
  std::fprintf(stderr,
               "kvsim calibrate: %zu points, %zu curves fitted (%d unverified points at weight %g, %d curves resting on "
               "them, %zu points above their ceiling left out), %zu calibration files in %s\n",
               points.size(), fit.fits.size(), unverified, validate::kUnverifiedWeight, flagged, fit.above_ceiling.size(),
               fit.gpus.size(), dir.c_str());
  return 0;
}

}  // namespace kvsim
