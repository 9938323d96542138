#include "tests/properties/scenario_gen.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/yaml_reader.hpp"
#include "model/library.hpp"
#include "policies/registry.hpp"

namespace kvsim::props {

namespace {
// Library entries are loaded once per process: a property draws hundreds of scenarios from them.
template <class T, class Load>
const T& cached(std::map<std::string, T>& cache, LibraryKind k, const std::string& name, Load load) {
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load(resolve(k, name, "", 0, ""))).first;
  return it->second;
}
const GpuSpec& gpu_spec(const std::string& n) {
  static std::map<std::string, GpuSpec> c;
  return cached(c, LibraryKind::hardware, n, load_gpu_file);
}
const ModelConfig& model_spec(const std::string& n) {
  static std::map<std::string, ModelConfig> c;
  return cached(c, LibraryKind::model, n, load_model_file);
}

// One parameter's value near its default: default x 2^u with u in [-2, 2] (a default <= 0: anywhere in
// [lo, lo + 1], or in the range when it is narrower), rounded for an integer, clamped to the range.
rc::Gen<std::string> param_value(const ParamSpec& p) {
  if (!p.choices.empty()) {
    return rc::gen::map(rc::gen::inRange<int>(0, int(p.choices.size())),
                        [p](int i) { return param_text(p, double(i)); });
  }
  return rc::gen::map(rc::gen::inRange<int>(-20, 21), [p](int step) {
    const double hi = std::min(p.range.hi, p.default_value > 0 ? 1e12 : p.range.lo + 1);
    double v = p.default_value > 0 ? p.default_value * std::exp2(step / 10.0)
                                   : p.range.lo + (hi - p.range.lo) * (step + 20) / 40.0;
    if (p.integer) v = std::round(v);
    v = std::clamp(v, p.range.lo, p.range.hi);
    if (!p.range.contains(v)) v = p.default_value;
    return param_text(p, v);
  });
}
}  // namespace

const std::vector<std::string>& builtin_policy_names() {
  // The built-in policies: this executable's catalog also lists the test-only "overlap".
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = policy_catalog().names();
    std::erase(n, "overlap");
    return n;
  }();
  return names;
}

const std::vector<std::string>& implementation_profiles() {
  static const std::vector<std::string> profiles = [] {
    std::set<std::string> seen;
    std::vector<std::string> out;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(library_dir() + "/papers"))
      if (e.path().extension() == ".yaml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const YAML::Node doc = load_yaml_file(f.string());
      if (!doc["implementation"]) continue;
      YAML::Node n = YAML::Clone(doc["implementation"]);
      n.SetStyle(YAML::EmitterStyle::Flow);  // one line in the scenario's text
      YAML::Emitter e;
      e << n;
      if (seen.insert(e.c_str()).second) out.push_back(e.c_str());
    }
    return out;
  }();
  return profiles;
}

std::string ScenarioSpec::yaml() const {
  std::ostringstream y;
  y << "hardware: " << gpu << "\nhost: " << host << "\nmodel: " << model << "\ncalibration: " << calibration
    << "\nworkload:\n  context_tokens: " << context << "\n  output_tokens: " << output
    << "\n  batch: " << (batch > 0 ? std::to_string(batch) : "max") << "\n  tensor_parallel: " << tp
    << "\n  weight_dtype: " << weight_dtype << "\n  kv_dtype: " << kv_dtype
    << "\n  prefill_chunk_tokens: " << prefill_chunk << "\n  cuda_graphs: " << (cuda_graphs ? "true" : "false") << "\n";
  if (implementation >= 0) y << "implementation: " << implementation_profiles()[size_t(implementation)] << "\n";
  y << "policies:\n  - {name: " << policy;
  for (const auto& [k, v] : params) y << ", " << k << ": " << v;
  y << "}\n";
  return y.str();
}

void showValue(const ScenarioSpec& s, std::ostream& os) { os << "\n" << s.yaml(); }

Scenario load(const ScenarioSpec& s) {
  return load_scenario(load_yaml_string(s.yaml(), "property case"), "property case", policy_catalog());
}

rc::Gen<std::vector<std::pair<std::string, std::string>>> policy_params(const std::string& policy) {
  const Policy* pol = policy_catalog().find(policy);
  std::vector<rc::Gen<rc::Maybe<std::string>>> each;
  for (const ParamSpec& p : pol->params()) each.push_back(rc::gen::maybe(param_value(p)));
  return rc::gen::exec([pol, each] {
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < each.size(); ++i)
      if (auto v = *each[i]) out.emplace_back(pol->params()[i].name, *v);
    return out;
  });
}

rc::Gen<ScenarioSpec> scenarios(const Draw& d) {
  return rc::gen::exec([d] {
    ScenarioSpec s;
    s.gpu = *rc::gen::elementOf(library_names(LibraryKind::hardware));
    s.host = *rc::gen::elementOf(library_names(LibraryKind::host));
    s.model = *rc::gen::elementOf(library_names(LibraryKind::model));
    const GpuSpec& g = gpu_spec(s.gpu);
    const ModelConfig& m = model_spec(s.model);
    const DType native = g.tensor_peak(m.dtype) > 0 ? m.dtype : DType::fp16;
    s.weight_dtype = s.kv_dtype = std::string(to_string(native));
    if (d.dtypes) {
      std::vector<std::string> weights;
      for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8})
        if (g.tensor_peak(t) > 0) weights.emplace_back(to_string(t));
      s.weight_dtype = *rc::gen::elementOf(weights);
      s.kv_dtype = *rc::gen::element<std::string>(std::string(to_string(native)), "fp8", "fp16");
    }
    if (d.tp) {
      std::vector<int> tps;
      for (int t : {1, 2, 4, 8})
        if (m.splits_over(t)) tps.push_back(t);
      s.tp = *rc::gen::elementOf(tps);
    }
    const int64_t top = std::min(d.max_context, m.max_context);
    s.context = *rc::gen::inRange<int64_t>(std::min<int64_t>(1024, top), top + 1);
    s.output = *rc::gen::inRange<int64_t>(1, 2049);
    s.batch = d.max_batch > 0 ? *rc::gen::inRange<int64_t>(1, d.max_batch + 1) : 0;
    if (d.engine) {
      s.prefill_chunk = *rc::gen::element<int64_t>(8192, 512, 2048, 16384);
      s.cuda_graphs = *rc::gen::element(true, false);
    }
    if (d.implementation) s.implementation = *rc::gen::inRange<int>(-1, int(implementation_profiles().size()));
    if (d.policy) s.policy = *rc::gen::elementOf(builtin_policy_names());
    if (d.params) s.params = *policy_params(s.policy);
    return s;
  });
}

}  // namespace kvsim::props
