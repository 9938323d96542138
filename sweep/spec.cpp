#include "sweep/spec.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.hpp"
#include "model/library.hpp"
#include "policies/registry.hpp"

namespace kvsim::sweep {

namespace fs = std::filesystem;

bool is_deployment_field(FieldKind k) {
  return k != FieldKind::context_tokens && k != FieldKind::output_tokens && k != FieldKind::batch &&
         k != FieldKind::policy_param;
}

bool AxisGroup::applies_to(const Policy* p) const {
  for (const Axis& a : axes)
    if (a.kind != FieldKind::policy_param || a.policy == p) return true;
  return false;
}

bool AxisGroup::has_deployment_field() const {
  for (const Axis& a : axes)
    if (is_deployment_field(a.kind)) return true;
  return false;
}

bool pareto_column_known(const std::string& c, bool* maximize) {
  static const std::map<std::string, bool> kColumns = {
      {"tpot_s", false},         {"ttft_s", false},      {"throughput_tok_s", true}, {"hbm_bytes", false},
      {"kv_hbm_bytes", false},   {"dram_bytes", false},  {"recall_mean", true},      {"recall_p10", true},
      {"topk_recall", true},     {"error_mean", false}};
  const auto it = kColumns.find(c);
  if (it == kColumns.end()) return false;
  if (maximize) *maximize = it->second;
  return true;
}

namespace {

struct FieldInfo {
  FieldKind kind;
  LibraryKind library = LibraryKind::hardware;
};

// The scenario fields an axis may vary, by the name a sweep file gives them.
const std::map<std::string, FieldInfo>& scenario_fields() {
  static const std::map<std::string, FieldInfo> f = {
      {"hardware", {FieldKind::hardware, LibraryKind::hardware}},
      {"host", {FieldKind::host, LibraryKind::host}},
      {"model", {FieldKind::model, LibraryKind::model}},
      {"calibration", {FieldKind::calibration, LibraryKind::calibration}},
      {"workload.tensor_parallel", {FieldKind::tensor_parallel}},
      {"workload.weight_dtype", {FieldKind::weight_dtype}},
      {"workload.kv_dtype", {FieldKind::kv_dtype}},
      {"workload.hbm_utilization", {FieldKind::hbm_utilization}},
      {"workload.prefill_chunk_tokens", {FieldKind::prefill_chunk_tokens}},
      {"workload.cuda_graphs", {FieldKind::cuda_graphs}},
      {"workload.allow_long_context", {FieldKind::allow_long_context}},
      {"workload.context_tokens", {FieldKind::context_tokens}},
      {"workload.output_tokens", {FieldKind::output_tokens}},
      {"workload.batch", {FieldKind::batch}},
  };
  return f;
}

std::vector<std::string> known_field_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : scenario_fields()) names.push_back(k);
  for (const Policy* p : all_policies())
    for (const ParamSpec& s : p->params()) names.push_back(std::string(p->name()) + "." + s.name);
  return names;
}

// Context for error messages about one axis.
struct Where {
  const std::string& file;
  int line;
  std::string field;
  [[noreturn]] void fail(const std::string& msg) const { throw_input_error(file, line, field, msg); }
};

// One value as the user wrote it (a YAML scalar) or as a range generated it (a number).
struct RawValue {
  bool is_number = false;
  double number = 0;
  std::string text;
};

// What a field allows, and the canonical (number, text) of one value.
struct Domain {
  enum Type { integer, real, word, boolean, any } type = real;
  Range range = Range::between(-1e300, 1e300);
  std::vector<std::string> words = {};  // word: the allowed words (value = index); integer: extra words
  std::vector<double> word_values = {};  // integer fields with words (batch: max = 0)
  std::string describe() const {
    switch (type) {
      case integer: return "an integer " + range.describe() + (words.empty() ? "" : ", or " + join(words));
      case real: return "a number " + range.describe();
      case word: return "one of " + join(words);
      case boolean: return "true or false";
      case any: return "what the library file allows there";
    }
    return "";
  }
};

Domain domain_of(FieldKind k, const ParamSpec* spec) {
  Domain d;
  switch (k) {
    case FieldKind::hardware: case FieldKind::host: case FieldKind::model: case FieldKind::calibration:
      d.type = Domain::word;  // checked against the library separately
      break;
    case FieldKind::tensor_parallel: d = {Domain::integer, Range::between(1, 64)}; break;
    case FieldKind::weight_dtype: case FieldKind::kv_dtype:
      d.type = Domain::word;
      d.words = {"fp32", "fp16", "bf16", "fp8"};
      break;
    case FieldKind::hbm_utilization: d = {Domain::real, Range{0, 1, true}}; break;
    case FieldKind::prefill_chunk_tokens: case FieldKind::context_tokens: case FieldKind::output_tokens:
      d = {Domain::integer, Range::between(1, double(1LL << 32))};
      break;
    case FieldKind::batch:
      d = {Domain::integer, Range::between(1, 1e9), {"max"}, {0}};
      break;
    case FieldKind::cuda_graphs: case FieldKind::allow_long_context: d.type = Domain::boolean; break;
    case FieldKind::library_field: d.type = Domain::any; break;
    case FieldKind::policy_param:
      if (!spec->choices.empty()) {
        d.type = Domain::word;
        d.words = spec->choices;
      } else {
        d = {spec->integer ? Domain::integer : Domain::real, spec->range};
      }
      break;
  }
  return d;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

// Checks one value against the field's domain and appends its canonical number and text.
void add_value(Axis& a, const Domain& d, const RawValue& v, const Where& w) {
  double as_number = 0;
  const std::string shown = v.is_number                          ? format_number(v.number)
                            : parse_double(v.text, as_number)   ? v.text
                                                                 : "'" + v.text + "'";
  auto bad = [&](const std::string& why) {
    w.fail("value " + shown + " " + why + "; allowed: " + d.describe());
  };
  if (d.type == Domain::any) {  // a library file's key: its loader checks the value (load_sweep)
    double x = v.number;
    const bool numeric = v.is_number || parse_double(v.text, x);
    a.texts.push_back(numeric ? format_number(x) : v.text);
    a.numbers.push_back(double(a.numbers.size()));
    return;
  }
  if (d.type == Domain::word) {
    if (v.is_number) bad("is a number");
    if (d.words.empty()) {  // a library entry: a name or a path, resolved now so typos fail here
      static const std::map<FieldKind, LibraryKind> lib = {{FieldKind::hardware, LibraryKind::hardware},
                                                          {FieldKind::host, LibraryKind::host},
                                                          {FieldKind::model, LibraryKind::model},
                                                          {FieldKind::calibration, LibraryKind::calibration}};
      resolve(lib.at(a.kind), v.text, w.file, w.line, w.field);
      a.numbers.push_back(double(a.numbers.size()));
      a.texts.push_back(v.text);
      return;
    }
    for (size_t i = 0; i < d.words.size(); ++i) {
      if (d.words[i] != v.text) continue;
      a.numbers.push_back(double(i));
      a.texts.push_back(v.text);
      return;
    }
    bad("is not allowed" + suggestion(v.text, d.words));
  }
  if (d.type == Domain::boolean) {
    if (v.text != "true" && v.text != "false") bad("is not a boolean");
    a.numbers.push_back(v.text == "true" ? 1 : 0);
    a.texts.push_back(v.text);
    return;
  }
  double x = v.number;
  if (!v.is_number) {
    for (size_t i = 0; i < d.words.size(); ++i) {
      if (d.words[i] != v.text) continue;
      a.numbers.push_back(d.word_values[i]);
      a.texts.push_back(v.text);
      return;
    }
    if (!parse_double(v.text, x)) bad("is not a number");
  }
  if (!d.range.contains(x)) bad("is out of range");
  if (d.type == Domain::integer && x != std::floor(x)) bad("is not an integer");
  // The value is the one its text reads back as, so the results file and the model agree exactly.
  const std::string text = format_number(x);
  parse_double(text, x);
  a.numbers.push_back(x);
  a.texts.push_back(text);
}

// A range mapping: {from, to, step} | {from, to, points[, log]} | {from, to, factor}.
std::vector<RawValue> expand_range(const YAML::Node& n, const Domain& d, const Where& w) {
  YamlMap m(n, w.file, w.field);
  const double from = m.number("from", Range::between(-1e300, 1e300));
  const double to = m.number("to", Range::between(-1e300, 1e300));
  const bool has_step = m.has("step"), has_points = m.has("points"), has_factor = m.has("factor");
  const bool log = m.boolean("log", false);
  if (int(has_step) + int(has_points) + int(has_factor) != 1)
    m.fail("from", "a range needs exactly one of step, points (with log: true for log spacing) or factor");
  if (to < from) m.fail("to", "value " + format_number(to) + " is below from (" + format_number(from) + ")");
  std::vector<double> xs;
  constexpr size_t kMaxValues = 1000000;
  if (has_step) {
    if (log) m.fail("log", "log spacing takes points or factor, not step");
    const double step = m.number("step", Range::positive());
    const double n = std::floor((to - from) / step * (1 + 1e-12) + 1e-9);
    if (n >= double(kMaxValues)) m.fail("step", "value " + format_number(step) + " gives more than 1000000 values");
    for (int64_t i = 0; i <= int64_t(n); ++i) xs.push_back(from + double(i) * step);
  } else if (has_points) {
    const int64_t pts = m.integer("points", Range::between(1, double(kMaxValues)));
    if (log && from <= 0) m.fail("from", "value " + format_number(from) + " must be > 0 for a log range");
    for (int64_t i = 0; i < pts; ++i) {
      const double t = pts == 1 ? 0 : double(i) / double(pts - 1);
      xs.push_back(log ? from * std::pow(to / from, t) : from + (to - from) * t);
    }
    if (pts > 1) xs.back() = to;
  } else {
    if (log) m.fail("log", "a factor range is already logarithmic; leave out log");
    const double f = m.number("factor", Range{1, 1e18, true});
    if (from <= 0) m.fail("from", "value " + format_number(from) + " must be > 0 for a factor range");
    for (double x = from; x <= to * (1 + 1e-12); x *= f) {
      xs.push_back(x);
      if (xs.size() > kMaxValues) m.fail("factor", "value " + format_number(f) + " gives more than 1000000 values");
    }
  }
  m.finish();
  std::vector<RawValue> out;
  for (double x : xs) {
    // Integer fields round a generated value (a log range of token counts) and drop repeats.
    if (d.type == Domain::integer) x = std::round(x);
    if (!out.empty() && out.back().number == x) continue;
    out.push_back({true, x, ""});
  }
  return out;
}

Axis parse_axis(const std::string& field, const YAML::Node& values, const std::string& file, const std::string& where) {
  Axis a;
  a.field = field;
  a.line = line_of(values);
  const Where w{file, a.line, where + field};
  const ParamSpec* spec = nullptr;
  const std::string head = field.substr(0, field.find('.'));
  if (const auto it = scenario_fields().find(field); it != scenario_fields().end()) {
    a.kind = it->second.kind;
  } else if ((head == "hardware" || head == "host" || head == "model") && field.size() > head.size() + 1) {
    a.kind = FieldKind::library_field;
    a.entry = head;
    a.key = field.substr(head.size() + 1);
  } else {
    const size_t dot = field.find('.');
    const std::string pname = dot == std::string::npos ? field : field.substr(0, dot);
    const Policy* p = dot == std::string::npos || pname == "workload" ? nullptr : find_policy(pname);
    if (!p) {
      w.fail("unknown field '" + field + "'" + suggestion(field, known_field_names()) +
             "; allowed: hardware, host, model, calibration, workload.FIELD, POLICY.PARAM (see `kvsim policy show`), "
             "or hardware.KEY, host.KEY, model.KEY (a key of that library file, e.g. hardware.memory.bandwidth_gbs)");
    }
    const std::string param = field.substr(dot + 1);
    a.kind = FieldKind::policy_param;
    a.policy = p;
    a.param = p->param_index(param);
    if (a.param < 0) {
      std::vector<std::string> names;
      for (const ParamSpec& s : p->params()) names.push_back(s.name);
      w.fail("policy '" + pname + "' has no parameter '" + param + "'" + suggestion(param, names) +
             "; its parameters: " + join(names));
    }
    spec = &p->params()[size_t(a.param)];
  }
  Domain d = domain_of(a.kind, spec);
  std::vector<RawValue> raw;
  if (values.IsSequence()) {
    if (values.size() == 0) w.fail("empty list; give at least one value");
    for (const YAML::Node& v : values) {
      if (!v.IsScalar()) throw_input_error(file, line_of(v), w.field, "expected a scalar value in the list");
      raw.push_back({false, 0, v.Scalar()});
    }
  } else if (values.IsMap()) {
    if (d.type == Domain::word || d.type == Domain::boolean)
      w.fail("a range needs a numeric field; allowed: " + d.describe() + " (give a list)");
    if (d.type == Domain::any) d.type = Domain::real;  // a range of a library key is numeric
    raw = expand_range(values, d, w);
  } else if (values.IsScalar()) {
    raw.push_back({false, 0, values.Scalar()});
  } else {
    w.fail("expected a list of values or a range {from, to, step | points [log: true] | factor}");
  }
  for (const RawValue& v : raw) add_value(a, d, v, {file, a.line, w.field});
  std::set<std::string> seen;
  for (const std::string& t : a.texts)
    if (!seen.insert(t).second) w.fail("value " + t + " appears twice (every point must be distinct)");
  return a;
}

std::string resolve_relative(const std::string& path, const std::string& file) {
  if (fs::exists(path) || fs::path(path).is_absolute()) return path;
  const fs::path beside = fs::path(file).parent_path() / path;
  return fs::exists(beside) ? beside.string() : path;
}

LibraryKind library_kind(const std::string& entry) {
  return entry == "hardware" ? LibraryKind::hardware : entry == "host" ? LibraryKind::host : LibraryKind::model;
}

// Loads a library entry as its loader would, to check a changed key.
void check_entry(const std::string& entry, const YAML::Node& n, const std::string& where) {
  YamlMap m(n, where, "");
  if (entry == "hardware") load_gpu(m);
  else if (entry == "host") load_host(m);
  else load_model(m);
}
}  // namespace

void set_library_field(YAML::Node& doc, const Axis& a, const std::string& text) {
  const YAML::Node given = YAML::Clone(doc[a.entry]);
  if (!given.IsDefined() || given.IsNull() || !given.IsMap()) {
    std::string name;
    if (given.IsDefined() && given.IsScalar()) {
      name = given.Scalar();
    } else if (a.entry == "host") {  // no host given: the GPU's default host, as the scenario loader does
      const YAML::Node hw = doc["hardware"];
      name = hw.IsMap() ? hw["default_host"].as<std::string>("")
                        : load_gpu_file(resolve(LibraryKind::hardware, hw.Scalar(), "", 0, "hardware")).default_host;
    }
    doc[a.entry] = YAML::Clone(load_yaml_file(resolve(library_kind(a.entry), name, "", 0, a.entry)));
  }
  // Walk to the key's parent mapping. Node copies share the tree, and assigning to an existing Node
  // variable would overwrite the node it refers to, so each step is a new Node.
  std::vector<YAML::Node> chain{doc[a.entry]};
  size_t start = 0;
  for (size_t dot; (dot = a.key.find('.', start)) != std::string::npos; start = dot + 1)
    chain.push_back(chain.back()[a.key.substr(start, dot - start)]);
  chain.back()[a.key.substr(start)] = YAML::Load(text);
}

SweepSpec load_sweep_file(const std::string& path) { return load_sweep(load_yaml_file(path), path); }

namespace {

// The base scenario: a path (relative to the working directory or to this file), a mapping, or the
// library's default scenario.
void load_base_scenario(YamlMap& top, const std::string& file, SweepSpec& s) {
  const YAML::Node sn = top.node("scenario");
  if (!sn) {
    s.scenario_file = library_dir() + "/default.yaml";
    s.scenario_doc = load_yaml_file(s.scenario_file);
  } else if (sn.IsMap()) {
    s.scenario_file = file;
    s.scenario_doc = sn;
  } else if (sn.IsScalar()) {
    s.scenario_file = resolve_relative(sn.Scalar(), file);
    if (!fs::exists(s.scenario_file))
      top.fail("scenario", "file '" + sn.Scalar() + "' does not exist (relative to the working directory or to " + file + ")");
    s.scenario_doc = load_yaml_file(s.scenario_file);
  } else {
    top.fail("scenario", "expected a scenario file path or an inline scenario mapping");
  }
}

// Policies: names; their parameters come from the base scenario and vary through POLICY.PARAM axes.
// Then the base scenario itself, with the policies in place of its own.
void load_policies(YamlMap& top, const std::string& file, SweepSpec& s) {
  Overrides o;
  if (const YAML::Node pn = top.node("policies")) {
    if (!pn.IsSequence() || pn.size() == 0) top.fail("policies", "expected a non-empty list of policy names");
    for (size_t i = 0; i < pn.size(); ++i) {
      const std::string field = "policies[" + std::to_string(i) + "]";
      if (!pn[i].IsScalar())
        throw_input_error(file, line_of(pn[i]), field, "expected a policy name (vary parameters with POLICY.PARAM axes)");
      const std::string name = pn[i].Scalar();
      if (!find_policy(name))
        throw_input_error(file, line_of(pn[i]), field,
                          "unknown policy '" + name + "'" + suggestion(name, policy_names()) + "; available: " +
                              join(policy_names()));
      o.policies.push_back(name);
    }
  }
  s.base = load_scenario(s.scenario_doc, s.scenario_file, policy_catalog(), o);
  if (!o.policies.empty()) {
    // The scenario's own parameters for the policies it lists carry over.
    const YAML::Node own = s.scenario_doc["policies"];
    if (own && own.IsSequence()) {
      const Scenario with_own = load_scenario(s.scenario_doc, s.scenario_file, policy_catalog());
      for (PolicyChoice& c : s.base.policies)
        for (const PolicyChoice& oc : with_own.policies)
          if (oc.policy == c.policy) c.params = oc.params;
    }
  }
}

// Axes: a list; each item is {FIELD: VALUES} (crossed) or {zip: {FIELD: VALUES, ...}}.
// Every field varied goes into `fields`.
void load_axes(YamlMap& top, const std::string& file, SweepSpec& s, std::set<std::string>& fields) {
  auto check_new = [&](const Axis& a) {
    if (!fields.insert(a.field).second)
      throw_input_error(file, a.line, a.field, "varied by two axes; give each field one axis (zip them to pair values)");
    if (a.kind == FieldKind::policy_param) {
      bool listed = false;
      for (const PolicyChoice& c : s.base.policies) listed |= c.policy == a.policy;
      if (!listed)
        throw_input_error(file, a.line, a.field,
                          "policy '" + std::string(a.policy->name()) + "' is not among this sweep's policies (" +
                              [&] {
                                std::vector<std::string> n;
                                for (const PolicyChoice& c : s.base.policies) n.emplace_back(c.policy->name());
                                return join(n);
                              }() + ")");
    }
  };
  if (const YAML::Node an = top.node("axes")) {
    if (!an.IsSequence()) top.fail("axes", "expected a list of axes ({FIELD: values} or {zip: {FIELD: values, ...}})");
    for (size_t i = 0; i < an.size(); ++i) {
      const YAML::Node item = an[i];
      const std::string where = "axes[" + std::to_string(i) + "].";
      if (!item.IsMap() || item.size() != 1)
        throw_input_error(file, line_of(item), "axes[" + std::to_string(i) + "]",
                          "expected one FIELD: VALUES pair, or zip: {FIELD: VALUES, ...}");
      const auto kv = *item.begin();
      const std::string key = kv.first.Scalar();
      AxisGroup g;
      if (key == "zip") {
        if (!kv.second.IsMap() || kv.second.size() < 1)
          throw_input_error(file, line_of(kv.second), where + "zip", "expected a mapping FIELD: VALUES, ...");
        for (const auto& z : kv.second) g.axes.push_back(parse_axis(z.first.Scalar(), z.second, file, where + "zip."));
        for (const Axis& a : g.axes)
          if (a.numbers.size() != g.size())
            throw_input_error(file, a.line, where + "zip." + a.field,
                              "has " + std::to_string(a.numbers.size()) + " values but " + g.axes.front().field +
                                  " has " + std::to_string(g.size()) + "; zipped axes need equally many");
      } else {
        g.axes.push_back(parse_axis(key, kv.second, file, where));
      }
      for (const Axis& a : g.axes) check_new(a);
      s.groups.push_back(std::move(g));
    }
  }
}

// Library keys: each value checked by the library's loader on the base scenario's entry.
void check_library_values(const SweepSpec& s, const std::string& file) {
  for (const AxisGroup& g : s.groups)
    for (const Axis& a : g.axes) {
      if (a.kind != FieldKind::library_field) continue;
      for (const std::string& text : a.texts) {
        try {
          YAML::Node doc = YAML::Clone(s.scenario_doc);
          set_library_field(doc, a, text);
          check_entry(a.entry, doc[a.entry], a.entry);
        } catch (const InputError& e) {
          throw_input_error(file, a.line, a.field, "value " + text + " is not accepted: " + e.what());
        } catch (const YAML::Exception& e) {
          throw_input_error(file, a.line, a.field, "value " + text + " is not accepted: " + e.what());
        }
      }
    }
}

// The base scenario's context lengths are an axis of their own unless one is given.
void add_context_axis(SweepSpec& s, const std::set<std::string>& fields) {
  if (!fields.count("workload.context_tokens")) {
    Axis a;
    a.field = "workload.context_tokens";
    a.kind = FieldKind::context_tokens;
    for (int64_t c : s.base.workload.context_tokens) {
      a.numbers.push_back(double(c));
      a.texts.push_back(std::to_string(c));
    }
    AxisGroup g;
    g.axes.push_back(std::move(a));
    s.groups.insert(s.groups.begin(), std::move(g));
  }
}

// The optional trace the quality columns are replayed on: a path or {path, max_steps, topk, ...}.
void load_trace(YamlMap& top, const std::string& file, SweepSpec& s) {
  if (const YAML::Node tn = top.node("trace")) {
    TraceSettings t;
    if (tn.IsScalar()) {
      t.path = tn.Scalar();
    } else {
      YamlMap m = top.map("trace");
      t.path = m.string("path");
      t.max_steps = m.integer("max_steps", Range::between(0, 1e15), 0);
      t.topk = int(m.integer("topk", Range::between(1, 1 << 30), 64));
      t.memory_limit_gib = m.number("memory_limit_gib", Range::positive(), 8);
      t.cache = m.string("cache", "");
      m.finish();
    }
    t.path = resolve_relative(t.path, file);
    if (!fs::exists(t.path)) top.fail("trace", "file '" + t.path + "' does not exist");
    s.trace = t;
  }
}

// The Pareto fronts to write: pairs of result columns, with defaults that depend on whether there is a trace.
void load_pareto(YamlMap& top, const std::string& file, SweepSpec& s) {
  if (const YAML::Node pn = top.node("pareto")) {
    if (!pn.IsSequence()) top.fail("pareto", "expected a list of {x: COLUMN, y: COLUMN}");
    for (size_t i = 0; i < pn.size(); ++i) {
      YamlMap m(pn[i], file, "pareto[" + std::to_string(i) + "]");
      ParetoSpec p{m.string("x"), m.string("y")};
      for (const std::string* c : {&p.x, &p.y}) {
        const bool quality = c->rfind("recall", 0) == 0 || *c == "topk_recall" || *c == "error_mean";
        if (!pareto_column_known(*c))
          m.fail(c == &p.x ? "x" : "y", "unknown column '" + *c + "'; allowed: tpot_s, ttft_s, throughput_tok_s, hbm_bytes, "
                                         "kv_hbm_bytes, dram_bytes, recall_mean, recall_p10, topk_recall, error_mean");
        if (quality && !s.trace) m.fail(c == &p.x ? "x" : "y", "column '" + *c + "' needs a trace: (quality comes from replay)");
      }
      m.finish();
      s.pareto.push_back(p);
    }
  } else if (s.trace) {
    s.pareto = {{"tpot_s", "recall_mean"}, {"throughput_tok_s", "recall_mean"}};
  } else {
    s.pareto = {{"tpot_s", "throughput_tok_s"}};
  }
}

}  // namespace

SweepSpec load_sweep(const YAML::Node& doc, const std::string& file) {
  SweepSpec s;
  s.file = file;
  YamlMap top(doc, file, "");

  load_base_scenario(top, file, s);
  load_policies(top, file, s);
  std::set<std::string> fields;
  load_axes(top, file, s, fields);
  check_library_values(s, file);
  add_context_axis(s, fields);
  load_trace(top, file, s);
  load_pareto(top, file, s);
  top.finish();
  return s;
}

}  // namespace kvsim::sweep
