#include "model/scenario.hpp"

#include "core/error.hpp"
#include "model/library.hpp"
#include "model/policy_setting.hpp"

namespace kvsim {

namespace {
const char* kCommandLine = "command line";

// A YAML mapping {key: value} built from a command-line option, so the option's value is checked by
// the same code as the file's.
YamlMap cli_map(const std::string& key, const std::string& value, const std::string& section = "",
                const std::string& origin = kCommandLine) {
  YAML::Node n;
  try {
    n[key] = YAML::Load(value);
  } catch (const YAML::Exception&) {
    n[key] = value;
  }
  return YamlMap(n, origin, section, /*has_lines=*/false);
}

// Loads one library entry given by name, path or inline mapping.
template <class T, class LoadFile, class LoadMap>
T load_entry(const YAML::Node& n, LibraryKind kind, const std::string& file, const std::string& key,
             LoadFile load_file, LoadMap load_map) {
  if (n.IsMap()) return load_map(YamlMap(n, file, key));
  if (!n.IsScalar()) {
    throw_input_error(file, line_of(n), key, "expected a " + kind_label(kind) + " name, a path or a mapping");
  }
  return load_file(resolve(kind, n.Scalar(), file, line_of(n), key));
}

GpuSpec gpu_entry(const YAML::Node& n, const std::string& file) {
  return load_entry<GpuSpec>(n, LibraryKind::hardware, file, "hardware", load_gpu_file, load_gpu);
}
HostSpec host_entry(const YAML::Node& n, const std::string& file) {
  return load_entry<HostSpec>(n, LibraryKind::host, file, "host", load_host_file, load_host);
}
ModelConfig model_entry(const YAML::Node& n, const std::string& file) {
  return load_entry<ModelConfig>(n, LibraryKind::model, file, "model", load_model_file, load_model);
}
Calibration calibration_entry(const YAML::Node& n, const std::string& file) {
  return load_entry<Calibration>(n, LibraryKind::calibration, file, "calibration", load_calibration_file,
                                 load_calibration);
}

void parse_context(YamlMap& m, const std::string& key, std::vector<int64_t>& out) {
  const YAML::Node n = m.node(key);
  if (!n) m.fail(key, "missing required context length (tokens, a number or a list)");
  const Range r = Range::between(1, 1LL << 32);
  out.clear();
  auto add = [&](const YAML::Node& item) {
    const double v = m.parse_number(item, key, r);
    if (v != double(int64_t(v))) m.fail(key, "value " + item.Scalar() + " is not an integer; allowed: " + r.describe());
    out.push_back(int64_t(v));
  };
  if (!n.IsSequence()) return add(n);
  if (n.size() == 0) m.fail(key, "empty list; give at least one context length");
  for (const auto& item : n) add(item);
}

int64_t parse_batch(YamlMap& m, const std::string& key) {
  const YAML::Node n = m.node(key);
  if (!n) return 0;
  if (n.IsScalar() && n.Scalar() == "max") return 0;
  const char* allowed = "allowed: an integer 1 .. 1000000000, or max";
  double v = 0;
  try {
    v = m.parse_number(n, key, Range::between(-1e300, 1e300));
  } catch (const InputError&) {
    m.fail(key, "value '" + (n.IsScalar() ? n.Scalar() : std::string("(not a scalar)")) + "' is not a number; " + allowed);
  }
  if (v < 1 || v > 1e9) m.fail(key, "value " + n.Scalar() + " is out of range; " + allowed);
  if (v != double(int64_t(v))) m.fail(key, "value " + n.Scalar() + " is not an integer; " + allowed);
  return int64_t(v);
}

DType parse_dtype_field(YamlMap& m, const std::string& key, DType fallback) {
  DType t = fallback;
  parse_dtype(m.choice(key, {"fp32", "fp16", "bf16", "fp8"}, std::string(to_string(fallback))), t);
  return t;
}

// Applies "POLICY.PARAM=VALUE" to the chosen policies.
PolicyChoice parse_policy(const YAML::Node& n, const std::string& file, const std::string& field,
                          const PolicyCatalog& catalog) {
  std::string name;
  const int line = line_of(n);
  if (n.IsScalar()) name = n.Scalar();
  else if (n.IsMap() && n["name"] && n["name"].IsScalar()) name = n["name"].Scalar();
  else throw_input_error(file, line, field, "expected a policy name or a mapping with 'name' and parameters");
  PolicyChoice c;
  c.policy = catalog.find(name);
  if (!c.policy) {
    throw_input_error(file, line, field,
                      "unknown policy '" + name + "'" + suggestion(name, catalog.names()) + "; available: " +
                          join(catalog.names()));
  }
  c.params = c.policy->defaults();
  if (n.IsMap()) {
    YamlMap m(n, file, field);
    m.string("name");
    const auto& specs = c.policy->params();
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!m.has(specs[i].name)) { m.node(specs[i].name); continue; }
      c.params[i] = read_param(m, specs[i]);
    }
    m.finish();
  }
  return c;
}

// The scenario's `policies:` list (every policy at its defaults when absent), or --policy's names in its
// place: each at its defaults, or, with Overrides::keep_scenario_params, at the parameters the
// scenario's list gives it (the last entry naming it) when the list has it.
std::vector<PolicyChoice> load_policies(YamlMap& top, const std::string& file, const PolicyCatalog& catalog,
                                        const Overrides& o) {
  std::vector<PolicyChoice> own;
  YAML::Node pl = top.node("policies");
  const bool read_own = o.policies.empty() || o.keep_scenario_params;
  if (read_own && !pl) {
    for (const Policy* p : catalog.policies) own.push_back({p, p->defaults()});
  } else if (read_own && (!pl.IsSequence() || pl.size() == 0)) {
    top.fail("policies", "expected a non-empty list of policies (names or {name: ..., param: value})");
  } else if (read_own) {
    for (size_t i = 0; i < pl.size(); ++i)
      own.push_back(parse_policy(pl[i], file, "policies[" + std::to_string(i) + "]", catalog));
  }
  if (o.policies.empty()) return own;
  std::vector<PolicyChoice> chosen;
  for (const auto& p : o.policies) {
    PolicyChoice c = parse_policy(YAML::Node(p), o.origin, "--policy", catalog);
    for (const PolicyChoice& oc : own)
      if (oc.policy == c.policy) c.params = oc.params;
    chosen.push_back(std::move(c));
  }
  return chosen;
}
}  // namespace

Scenario load_scenario_file(const std::string& path, const PolicyCatalog& catalog, const Overrides& o) {
  return load_scenario(load_yaml_file(path), path, catalog, o);
}

Scenario load_scenario(const YAML::Node& doc, const std::string& file, const PolicyCatalog& catalog,
                       const Overrides& o) {
  Scenario s;
  s.file = file;
  YamlMap top(doc, file, "");

  auto entry_node = [&](const std::string& key, const std::optional<std::string>& cli,
                        std::string& src) -> YAML::Node {
    YAML::Node n = top.node(key);
    if (cli) {
      src = o.origin;
      return YAML::Node(*cli);
    }
    src = file;
    return n;
  };
  std::string src;
  YAML::Node hw = entry_node("hardware", o.hardware, src);
  if (!hw) top.fail("hardware", "missing required hardware (a name from `kvsim hardware list`, a path or a mapping)");
  s.gpu = gpu_entry(hw, src);

  YAML::Node hn = entry_node("host", o.host, src);
  if (!hn && s.gpu.default_host.empty()) {
    top.fail("host", "missing host, and hardware " + s.gpu.name + " names no default_host; give `host:` (see `kvsim host list`)");
  }
  s.host = hn ? host_entry(hn, src) : host_entry(YAML::Node(s.gpu.default_host), s.gpu.name + " (default_host)");

  YAML::Node mn = entry_node("model", o.model, src);
  if (!mn) top.fail("model", "missing required model (a name from `kvsim model list`, a path or a mapping)");
  s.model = model_entry(mn, src);

  YAML::Node cn = entry_node("calibration", o.calibration, src);
  // No calibration named (or `auto`): the best the library has for this GPU and host
  // (default_calibration); `roofline` is the uncalibrated bound.
  if (!cn || (cn.IsScalar() && cn.Scalar() == "auto")) s.calibration = default_calibration(s.gpu, s.host);
  else s.calibration = calibration_entry(cn, src);

  // Workload: every field may be overridden from the command line (same checks, "command line" origin).
  YamlMap w = top.map("workload");
  auto pick = [&](const std::string& key, const std::optional<std::string>& cli) -> YamlMap {
    w.node(key);  // the file's key is known even when overridden
    return cli ? cli_map(key, *cli, "workload", o.origin) : w;
  };
  {
    YamlMap m = pick("context_tokens", o.context);
    parse_context(m, "context_tokens", s.workload.context_tokens);
  }
  s.workload.output_tokens = pick("output_tokens", o.output).integer("output_tokens", Range::between(1, 1LL << 32), 1024);
  {
    YamlMap m = pick("batch", o.batch);
    s.workload.batch = parse_batch(m, "batch");
  }
  YamlMap tp_map = pick("tensor_parallel", o.tensor_parallel);
  s.workload.tensor_parallel = int(tp_map.integer("tensor_parallel", Range::between(1, 64), 1));
  // Default dtype: the model's, or fp16 where the GPU has no tensor cores for it (bf16 models run in
  // fp16 on Volta, as serving engines do). An explicit unsupported weight_dtype is still an error.
  const DType native = s.gpu.tensor_peak(s.model.dtype) > 0 ? s.model.dtype : DType::fp16;
  YamlMap weight_map = pick("weight_dtype", o.weight_dtype);
  s.workload.weight_dtype = parse_dtype_field(weight_map, "weight_dtype", native);
  {
    YamlMap kv_map = pick("kv_dtype", o.kv_dtype);
    s.workload.kv_dtype = parse_dtype_field(kv_map, "kv_dtype", native);
  }
  s.workload.hbm_utilization = w.number("hbm_utilization", Range{0, 1, true}, 0.9);
  s.workload.prefill_chunk_tokens = w.integer("prefill_chunk_tokens", Range::between(1, 1LL << 32), 8192);
  s.workload.cuda_graphs = w.boolean("cuda_graphs", true);
  s.workload.allow_long_context = w.boolean("allow_long_context", false);

  // Cross-field checks, each naming the field it blames.
  const int tp = s.workload.tensor_parallel;
  const ModelConfig& m = s.model;
  if (!m.splits_over(tp)) {
    tp_map.fail("tensor_parallel", "value " + std::to_string(tp) + " must divide query_heads (" +
                                  std::to_string(m.query_heads) + ") and ffn_hidden (" +
                                  std::to_string(m.ffn_hidden) + "), and divide or be a multiple of kv_heads (" +
                                  std::to_string(m.kv_heads) + ") of model " + m.name);
  }
  if (s.gpu.tensor_peak(s.workload.weight_dtype) <= 0) {
    weight_map.fail("weight_dtype", "value " + std::string(to_string(s.workload.weight_dtype)) + " has no tensor-core peak on " +
                               s.gpu.name + "; allowed on this GPU: the dtypes its compute section lists");
  }
  if (!s.workload.allow_long_context) {
    for (int64_t n : s.workload.context_tokens) {
      if (n > m.max_context) {
        YamlMap where = o.context ? cli_map("context_tokens", *o.context, "workload", o.origin) : w;
        where.fail("context_tokens", "value " + std::to_string(n) + " exceeds the max_context of model " + m.name +
                                         " (" + std::to_string(m.max_context) +
                                         "); allowed: 1 .. " + std::to_string(m.max_context) +
                                         ", or set workload.allow_long_context: true");
      }
    }
  }
  w.finish();

  s.policies = load_policies(top, file, catalog, o);
  for (const auto& set : o.sets) apply_set(set, s.policies, o.origin);
  if (top.has("implementation")) s.implementation = load_implementation(top.map("implementation"));
  s.reproduce = top.node("reproduce");
  s.serving = top.node("serving");
  top.finish();
  return s;
}

void apply_set(const std::string& s, std::vector<PolicyChoice>& policies, const std::string& origin) {
  const PolicySetting set = parse_policy_setting(s, "--set", "POLICY.PARAM=VALUE", origin);
  bool found = false;
  for (auto& c : policies) {
    if (c.policy->name() != set.policy) continue;
    found = true;
    const int i = setting_param_index(*c.policy, set.param, "--set", origin);
    YamlMap vm = cli_map(set.param, set.value, "", origin);
    c.params[size_t(i)] = read_param(vm, c.policy->params()[size_t(i)]);
  }
  if (!found) {
    throw_input_error(origin, 0, "--set",
                      "policy '" + set.policy + "' is not among this run's policies (add it with --policy " +
                          set.policy + ")");
  }
}

Deployment make_deployment(const Scenario& s) {
  const Workload& w = s.workload;
  Deployment d = make_deployment(s.model, s.gpu, s.host, s.calibration,
                                 {.tensor_parallel = w.tensor_parallel,
                                  .weight_dtype = w.weight_dtype,
                                  .kv_dtype = w.kv_dtype,
                                  .hbm_utilization = w.hbm_utilization,
                                  .prefill_chunk_tokens = w.prefill_chunk_tokens,
                                  .cuda_graphs = w.cuda_graphs});
  apply_implementation(d, s.implementation);
  return d;
}

}  // namespace kvsim
