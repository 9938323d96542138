// Evaluates sweep points. Everything that can be done once is done in the constructor: each
// deployment combination (hardware, host, model, calibration, workload deployment fields) is loaded
// and checked through the scenario loader once, and a point only picks its combination, copies the
// policy's base parameters, sets the varied fields in memory and calls the planner (model/plan).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/deployment.hpp"
#include "model/plan.hpp"
#include "sweep/space.hpp"

namespace kvsim::sweep {

// One deployment combination. Deployment points into `scenario`, so a Combo never moves.
struct Combo {
  Scenario scenario;
  Deployment deployment;
  bool valid = false;
  std::string error;          // why the combination is not a valid scenario (reported per point)
  uint64_t fingerprint = 0;   // hash of everything the combination fixes
};

// The resolved configuration of one point.
struct PointInputs {
  const Policy* policy = nullptr;
  ParamValues params;
  int64_t context = 0, output = 0, batch = 0;  // batch 0 = the largest that fits
  size_t combo = 0;
};

class Evaluator {
 public:
  Evaluator(const SweepSpec& spec, const PointSpace& space);
  // Fills `in` (reusing its storage) from a point's coordinates.
  void resolve(const Coords& c, PointInputs& in) const;
  // A stable identity of the point's full configuration (not of its number): what resume and merge
  // match rows by. It also covers the base scenario's text and the trace settings.
  uint64_t key(const PointInputs& in) const;
  PlanResult evaluate(const PointInputs& in) const;
  const Combo& combo(size_t i) const { return *combos_[i]; }

 private:
  const SweepSpec* spec_;
  const PointSpace* space_;
  std::vector<std::unique_ptr<Combo>> combos_;
  uint64_t base_fingerprint_ = 0;
};

// FNV-1a over bytes, continuing from `h`.
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 14695981039346656037ull);

}  // namespace kvsim::sweep
