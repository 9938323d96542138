// The kernel models (model/kernel_model.hpp) against kernel timings others published: each point of
// scenarios/measurements/kernel-models.yaml is one published timing of one kernel at one shape on one
// GPU; the model prices the same call through the planner's own path (a Phase of that shape, the GPU's
// default calibration, roofline()) and the error is prediction / measured - 1.
//
// Which points count (the rule, fixed in docs/validation/kernel-models.md before any comparison): a
// point counts in a model's median |error| when it is verified against its source and its GPU is
// stated there; every other point is listed, with its error, and weighted down (left out of the
// median). A point off by more than 2x carries a written explanation (`note:`), or the check says so.
#pragma once
#include <string>
#include <vector>

#include "model/kernel_model.hpp"

namespace kvsim::validate {

struct KernelCheckPoint {
  std::string id, gpu, shape, source, note;
  KernelModelId model = KernelModelId::none;
  bool counted = false;  // verified and GPU stated: in the median
  double measured_s = 0, predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1; }
};

struct KernelModelSummary {
  KernelModelId model = KernelModelId::none;
  int points = 0, counted = 0, sources = 0;
  double median_abs_error = 0;  // over the counted points (0 when none)
  double p10 = 0, p90 = 0;       // signed errors (predicted / measured - 1) of the counted points
};

struct KernelCheckReport {
  std::vector<KernelCheckPoint> points;
  std::vector<KernelModelSummary> models;  // one per model with points, in KernelModelId order
  std::vector<std::string> unexplained;    // ids of points off by more than 2x with no note
};

// Reads the measurement file (errors name the file, field and value) and prices every point.
KernelCheckReport check_kernel_models(const std::string& path);

// The report as Markdown (docs/validation/kernel-models.md's generated part) and as YAML for the
// planner (scenarios/measurements/kernel-model-checks.yaml: each model's median error and points).
std::string kernel_check_markdown(const KernelCheckReport& r, const std::string& command);
std::string kernel_check_yaml(const KernelCheckReport& r, const std::string& command);

}  // namespace kvsim::validate
