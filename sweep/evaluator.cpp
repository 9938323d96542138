#include "sweep/evaluator.hpp"

#include "core/error.hpp"
#include "policies/registry.hpp"

namespace kvsim::sweep {

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

namespace {
uint64_t hash_text(const std::string& s, uint64_t h) {
  h = fnv1a(s.data(), s.size(), h);
  const char sep = '\x1f';
  return fnv1a(&sep, 1, h);
}

// Writes a deployment field's value into a scenario document, where the scenario loader checks it.
void set_field(YAML::Node& doc, const Axis& a, const std::string& text) {
  switch (a.kind) {
    case FieldKind::hardware: doc["hardware"] = text; break;
    case FieldKind::host: doc["host"] = text; break;
    case FieldKind::model: doc["model"] = text; break;
    case FieldKind::calibration: doc["calibration"] = text; break;
    default: doc["workload"][a.field.substr(a.field.find('.') + 1)] = YAML::Load(text); break;
  }
}
}  // namespace

Evaluator::Evaluator(const SweepSpec& spec, const PointSpace& space) : spec_(&spec), space_(&space) {
  base_fingerprint_ = hash_text(YAML::Dump(spec.scenario_doc), fnv1a("kvsim.sweep/1", 13));
  if (spec.trace) {
    const TraceSettings& t = *spec.trace;
    base_fingerprint_ = hash_text(t.path + "|" + std::to_string(t.max_steps) + "|" + std::to_string(t.topk),
                                  base_fingerprint_);
  }
  std::vector<uint32_t> digit;
  for (size_t i = 0; i < space.combo_count(); ++i) {
    auto c = std::make_unique<Combo>();
    space.combo_digits(i, digit);
    YAML::Node doc = YAML::Clone(spec.scenario_doc);
    uint64_t fp = base_fingerprint_;
    std::string what;
    // Entries first, then keys inside them (hardware: [h100-sxm, h200] with hardware.memory.X).
    for (const bool keys : {false, true}) {
      for (size_t g = 0; g < spec.groups.size(); ++g) {
        for (const Axis& a : spec.groups[g].axes) {
          if (!is_deployment_field(a.kind) || keys != (a.kind == FieldKind::library_field)) continue;
          const std::string& text = a.texts[digit[g]];
          fp = hash_text(a.field + "=" + text, fp);
          what += (what.empty() ? "" : ", ") + a.field + "=" + text;
          try {
            if (keys) set_library_field(doc, a, text);
            else set_field(doc, a, text);
          } catch (const InputError& e) {
            if (c->error.empty()) c->error = "invalid combination (" + what + "): " + e.what();
          }
        }
      }
    }
    c->fingerprint = fp;
    Overrides o;
    o.policies = {"full"};  // the sweep's policies are resolved once, from the base scenario
    o.context = "1";        // context lengths are checked per point against each model
    try {
      if (!c->error.empty()) throw InputError(c->error);
      c->scenario = load_scenario(doc, spec.scenario_file, policy_catalog(), o);
      c->deployment = make_deployment(c->scenario);
      c->valid = true;
    } catch (const InputError& e) {
      if (c->error.empty()) c->error = "invalid combination (" + what + "): " + e.what();
    }
    combos_.push_back(std::move(c));
  }
}

void Evaluator::resolve(const Coords& c, PointInputs& in) const {
  const PolicyChoice& pc = spec_->base.policies[c.policy];
  const Workload& w = spec_->base.workload;
  in.policy = pc.policy;
  in.params.assign(pc.params.begin(), pc.params.end());
  in.context = w.context_tokens.front();
  in.output = w.output_tokens;
  in.batch = w.batch;
  for (size_t g = 0; g < spec_->groups.size(); ++g) {
    const uint32_t d = c.digit[g];
    for (const Axis& a : spec_->groups[g].axes) {
      switch (a.kind) {
        case FieldKind::context_tokens: in.context = int64_t(a.numbers[d]); break;
        case FieldKind::output_tokens: in.output = int64_t(a.numbers[d]); break;
        case FieldKind::batch: in.batch = int64_t(a.numbers[d]); break;
        case FieldKind::policy_param:
          if (a.policy == pc.policy) in.params[size_t(a.param)] = a.numbers[d];
          break;
        default: break;
      }
    }
  }
  in.combo = space_->combo_of(c);
}

uint64_t Evaluator::key(const PointInputs& in) const {
  uint64_t h = combos_[in.combo]->fingerprint;
  h = hash_text(std::string(in.policy->name()), h);
  h = fnv1a(in.params.data(), in.params.size() * sizeof(double), h);
  const int64_t ints[3] = {in.context, in.output, in.batch};
  return fnv1a(ints, sizeof ints, h);
}

PlanResult Evaluator::evaluate(const PointInputs& in) const {
  const Combo& c = *combos_[in.combo];
  if (!c.valid) {
    PlanResult r;
    r.policy = in.policy;
    r.params = in.params;
    r.context_tokens = in.context;
    r.output_tokens = in.output;
    r.reason = c.error;
    return r;
  }
  const ModelConfig& m = c.scenario.model;
  if (in.context > m.max_context && !c.scenario.workload.allow_long_context) {
    PlanResult r;
    r.policy = in.policy;
    r.params = in.params;
    r.context_tokens = in.context;
    r.output_tokens = in.output;
    r.reason = "context " + std::to_string(in.context) + " exceeds the max_context of model " + m.name + " (" +
               std::to_string(m.max_context) + "); set workload.allow_long_context: true to model it anyway";
    return r;
  }
  const DesignPoint p{&c.deployment, in.policy, &in.params, in.context, in.output, in.batch};
  return kvsim::evaluate(p);
}

}  // namespace kvsim::sweep
