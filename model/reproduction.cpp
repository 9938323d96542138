#include "model/reproduction.hpp"

#include "model/uncertainty.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "model/library.hpp"
#include "model/plan.hpp"

namespace kvsim {

namespace {

struct MetricInfo {
  ReproMetric metric;
  const char* name;
  bool bytes;  // true: a memory figure (byte units); false: a time (s, ms)
};
constexpr MetricInfo kMetrics[] = {
    {ReproMetric::tpot, "tpot", false},         {ReproMetric::ttft, "ttft", false},
    {ReproMetric::latency, "latency", false},   {ReproMetric::hbm_peak, "hbm_peak", true},
    {ReproMetric::kv_prompt, "kv_prompt", true}, {ReproMetric::kv_per_token, "kv_per_token", true},
    {ReproMetric::phase, "phase", false},       {ReproMetric::throughput, "throughput", false},
};

const std::map<std::string, double>& time_units() {
  static const std::map<std::string, double> u = {{"s", 1.0}, {"ms", 1e-3}};
  return u;
}
const std::map<std::string, double>& rate_units() {
  static const std::map<std::string, double> u = {{"tok/s", 1.0}};
  return u;
}
const std::map<std::string, double>& byte_units() {
  static const std::map<std::string, double> u = {{"B", 1.0},         {"KiB", 1024.0}, {"MiB", 1048576.0},
                                                  {"GiB", 1073741824.0}, {"KB", 1e3},  {"MB", 1e6},
                                                  {"GB", 1e9}};
  return u;
}

// The units a metric's figures may be given in: bytes, a rate, or a time.
const std::map<std::string, double>& units_of(ReproMetric m) {
  if (m == ReproMetric::hbm_peak || m == ReproMetric::kv_prompt || m == ReproMetric::kv_per_token) return byte_units();
  if (m == ReproMetric::throughput) return rate_units();
  return time_units();
}
std::vector<std::string> keys(const std::map<std::string, double>& m) {
  std::vector<std::string> k;
  for (const auto& [name, _] : m) k.push_back(name);
  return k;
}

// Digits after the decimal point as printed ("16.80" -> 2), less a printed exponent ("1.5e3" -> -2):
// the last printed digit is worth 10^-decimals.
int decimals_of(const std::string& text) {
  const auto dot = text.find('.');
  int n = 0;
  if (dot != std::string::npos)
    for (size_t i = dot + 1; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) ++n;
  const auto e = text.find_first_of("eE");
  if (e != std::string::npos) n -= std::atoi(text.c_str() + e + 1);
  return n;
}

// Whether `text` (a value as written) appears in `printed` as a whole number: "1" is not in "1.0000".
bool prints_number(const std::string& printed, const std::string& text) {
  const auto digit = [&](size_t i) { return i < printed.size() && std::isdigit(static_cast<unsigned char>(printed[i])); };
  for (size_t at = printed.find(text); at != std::string::npos; at = printed.find(text, at + 1)) {
    const size_t end = at + text.size();
    const bool before = at > 0 && (digit(at - 1) || (printed[at - 1] == '.' && at > 1 && digit(at - 2)));
    const bool after = digit(end) || (end < printed.size() && printed[end] == '.' && digit(end + 1));
    if (!before && !after) return true;
  }
  return false;
}

// A series' `printed:` (the paper's words, one string for every value or a list of one per value).
// An exact figure needs them, must not be worded approximately, and must be written in `values` with
// the printed digits (its tolerance is half a unit of the last one).
void read_printed(YamlMap& m, const YAML::Node& vals, std::vector<PublishedFigure>& figs) {
  const YAML::Node n = m.node("printed");
  std::vector<std::string> texts(figs.size());
  if (n && n.IsScalar()) {
    for (auto& t : texts) t = n.Scalar();
  } else if (n && n.IsSequence() && n.size() == figs.size()) {
    for (size_t i = 0; i < figs.size(); ++i) {
      if (!n[i].IsScalar()) m.fail("printed", "expected the paper's words for each value");
      texts[i] = n[i].Scalar();
    }
  } else if (n) {
    m.fail("printed", "expected the paper's words for the value (a string), or a list of one per value (" +
                          std::to_string(figs.size()) + ")");
  }
  for (size_t i = 0; i < figs.size(); ++i) {
    PublishedFigure& f = figs[i];
    f.printed = texts[i];
    f.approximate = is_approximate_wording(f.printed);
    if (!f.exact) continue;
    if (f.printed.empty())
      m.fail("printed", "missing: exact: true needs the paper's words for the figure (printed: \"33.55 GB\"), to show it is "
                        "given as a number and not as 'around' one");
    if (f.approximate)
      m.fail("exact", "the paper words this figure '" + f.printed +
                          "': an approximate figure is never exact; allowed: exact: true only for a figure printed as a plain number");
    if (!f.oom && !prints_number(f.printed, vals[i].Scalar()))
      m.fail("values", "value " + vals[i].Scalar() + " is not written as printed ('" + f.printed +
                           "'); allowed: the printed digits, which set the exactness tolerance");
  }
}

std::vector<std::string> string_list(YamlMap& m, const std::string& key) {
  std::vector<std::string> out;
  const YAML::Node n = m.node(key);
  if (!n) return out;
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) m.fail(key, "expected a name or a list of names");
  for (const auto& item : n) {
    if (!item.IsScalar()) m.fail(key, "expected a list of names");
    out.push_back(item.Scalar());
  }
  return out;
}

// One `series:` entry: a policy and metric over one or more contexts, one published value each.
void load_series(const YAML::Node& node, const std::string& file, const std::string& field, const Scenario& s,
                 std::vector<PublishedFigure>& out) {
  if (!node.IsMap()) throw_input_error(file, line_of(node), field, "expected a mapping (source, policy, metric, unit, contexts, values)");
  YamlMap m(node, file, field);
  PublishedFigure f;
  f.line = m.line();
  f.source = m.string("source");
  f.policy = m.string("policy");
  const PolicyChoice* choice = nullptr;
  for (const PolicyChoice& c : s.policies)
    if (c.policy->name() == f.policy) { choice = &c; break; }
  if (!choice) {
    std::vector<std::string> names;
    for (const PolicyChoice& c : s.policies) names.emplace_back(c.policy->name());
    m.fail("policy", "value '" + f.policy + "' is not among the scenario's policies" + suggestion(f.policy, names) +
                         "; allowed: " + join(names));
  }
  f.pol = choice->policy;
  f.label = m.string("label", f.policy);
  f.params = choice->params;
  if (m.has("set")) {
    YamlMap set = m.map("set");
    const auto& specs = f.pol->params();
    for (size_t i = 0; i < specs.size(); ++i) {
      set.node(specs[i].name);
      if (set.has(specs[i].name)) f.params[i] = read_param(set, specs[i]);
    }
    set.finish();
  }
  std::vector<std::string> metric_names;
  for (const auto& mi : kMetrics) metric_names.emplace_back(mi.name);
  const std::string metric = m.choice("metric", metric_names);
  const MetricInfo* info = nullptr;
  for (const auto& mi : kMetrics)
    if (metric == mi.name) info = &mi;
  f.metric = info->metric;
  f.unit = m.choice("unit", keys(units_of(f.metric)));
  f.phases = string_list(m, "phases");
  f.stage = m.choice("stage", {"prefill", "decode"}, "decode");
  if (f.metric == ReproMetric::phase && f.phases.empty()) m.fail("phases", "metric phase needs the phase names to sum (see `kvsim plan --format json`)");
  if (!f.phases.empty() && f.metric != ReproMetric::phase && f.metric != ReproMetric::tpot) {
    m.fail("phases", "only metric phase (phases summed) and tpot (phases excluded) take phases");
  }
  f.exact = m.boolean("exact", false);
  if (f.exact && !info->bytes) m.fail("exact", "only memory metrics can be exact; times are compared by shape and error");
  f.note = m.string("note", "");
  f.comparable = m.boolean("comparable", true);
  if (!f.comparable && f.note.empty())
    m.fail("comparable", "false needs a note: why the published number does not measure this configuration");
  const int64_t default_batch = s.workload.batch > 0 ? s.workload.batch : 1;
  f.output = m.integer("output", Range::between(1, 1LL << 32), s.workload.output_tokens);
  f.batch = m.integer("batch", Range::between(1, 1e9), default_batch);

  const YAML::Node ctx = m.node("contexts"), vals = m.node("values");
  if (!ctx || !ctx.IsSequence() || ctx.size() == 0) m.fail("contexts", "missing or empty list of context lengths (tokens)");
  if (!vals || !vals.IsSequence()) m.fail("values", "missing list of published values (numbers, or OOM)");
  if (vals.size() != ctx.size()) {
    m.fail("values", "has " + std::to_string(vals.size()) + " values for " + std::to_string(ctx.size()) +
                         " contexts; allowed: one value per context");
  }
  std::vector<PublishedFigure> figs;
  for (size_t i = 0; i < ctx.size(); ++i) {
    PublishedFigure g = f;
    const double c = m.parse_number(ctx[i], "contexts", Range::between(1, 1LL << 32));
    if (c != std::floor(c)) m.fail("contexts", "value " + ctx[i].Scalar() + " is not an integer");
    g.context = int64_t(c);
    g.line = line_of(vals[i]) > 0 ? line_of(vals[i]) : f.line;
    if (vals[i].IsScalar() && vals[i].Scalar() == "OOM") {
      g.oom = true;
    } else {
      g.value = m.parse_number(vals[i], "values", Range::positive());
      g.decimals = decimals_of(vals[i].Scalar());
    }
    figs.push_back(std::move(g));
  }
  read_printed(m, vals, figs);
  m.finish();
  for (auto& g : figs) out.push_back(std::move(g));
}

// Sum of the named phases' solo roofline seconds (or of all but them).
double phase_seconds(const std::vector<PhaseResult>& phases, const std::vector<std::string>& names, bool include) {
  double t = 0;
  for (const PhaseResult& p : phases) {
    const bool named = std::find(names.begin(), names.end(), std::string(p.phase.name)) != names.end();
    if (named == include) t += p.seconds;
  }
  return t;
}

}  // namespace

bool is_approximate_wording(const std::string& printed) {
  std::string t;
  for (char c : printed) t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t.find('~') != std::string::npos || t.find("\u2248") != std::string::npos) return true;  // ~, ≈
  for (const char* w : {"around", "about", "approximately", "approx", "roughly", "nearly", "almost", "close to", "circa"}) {
    for (size_t at = t.find(w); at != std::string::npos; at = t.find(w, at + 1)) {
      const size_t end = at + std::string(w).size();
      const bool starts = at == 0 || !std::isalpha(static_cast<unsigned char>(t[at - 1]));
      const bool ends = end >= t.size() || !std::isalpha(static_cast<unsigned char>(t[end]));
      if (starts && ends) return true;
    }
  }
  return false;
}

const char* to_string(ReproMetric m) {
  for (const auto& mi : kMetrics)
    if (mi.metric == m) return mi.name;
  return "?";
}

Reproduction load_reproduction_file(const std::string& path, const PolicyCatalog& catalog) {
  return load_reproduction(load_yaml_file(path), path, catalog);
}

Reproduction load_reproduction(const YAML::Node& doc, const std::string& file, const PolicyCatalog& catalog) {
  Reproduction r;
  r.file = file;
  r.scenario = load_scenario(doc, file, catalog);
  if (!r.scenario.reproduce) throw_input_error(file, 0, "reproduce", "missing the reproduce: block (paper, title, series)");
  if (!r.scenario.reproduce.IsMap()) throw_input_error(file, line_of(r.scenario.reproduce), "reproduce", "expected a mapping (paper, title, series)");
  YamlMap m(r.scenario.reproduce, file, "reproduce");
  r.paper = m.string("paper");
  r.title = m.string("title");
  const YAML::Node series = m.node("series");
  if (!series || !series.IsSequence() || series.size() == 0) m.fail("series", "missing or empty list of published series");
  for (size_t i = 0; i < series.size(); ++i)
    load_series(series[i], file, "reproduce.series[" + std::to_string(i) + "]", r.scenario, r.figures);
  m.finish();
  return r;
}

std::vector<ReproRow> reproduce(const Reproduction& r) {
  const Deployment d = make_deployment(r.scenario);
  std::vector<ReproRow> rows;
  for (const PublishedFigure& f : r.figures) {
    ReproRow row;
    row.figure = &f;
    const double unit = units_of(f.metric).at(f.unit);
    double si = 0;          // seconds or bytes
    double lo = 0, hi = 0;  // its 80% range (times and throughputs only)
    if (f.metric == ReproMetric::kv_per_token) {
      si = d.kv_bytes_per_token();
    } else if (f.metric == ReproMetric::kv_prompt) {
      si = f.pol->memory(d, f.params, double(f.context), 0).kv_hbm_per_seq;
    } else {
      const PlanResult p = evaluate(DesignPoint{&d, f.pol, &f.params, f.context, f.output, f.batch});
      if (!p.feasible) {
        row.predicted_oom = true;
        row.oom_reason = p.reason;
      } else if (f.metric == ReproMetric::hbm_peak) {
        si = p.memory.hbm_bytes;
      } else if (f.metric == ReproMetric::ttft) {
        si = p.ttft_s;
        lo = p.ttft_lo_s, hi = p.ttft_hi_s;
      } else if (f.metric == ReproMetric::throughput) {
        si = p.throughput_tok_s;
        lo = p.throughput_lo_tok_s(), hi = p.throughput_hi_tok_s();
      } else if (f.metric == ReproMetric::latency) {
        si = p.ttft_s + double(f.output - 1) * p.tpot_s;
        lo = p.ttft_lo_s + double(f.output - 1) * p.tpot_lo_s, hi = p.ttft_hi_s + double(f.output - 1) * p.tpot_hi_s;
      } else if (f.metric == ReproMetric::tpot) {
        // With phases: the same step (simulated, host dispatch included) without their work; its range
        // is the whole step's, in proportion.
        si = f.phases.empty() ? p.tpot_s
                              : decode_step(d, *f.pol, f.params,
                                            StepShape{double(p.batch), double(f.context), double(f.output) / 2.0}, false,
                                            &f.phases)
                                    .seconds;
        lo = si * p.tpot_lo_s / p.tpot_s, hi = si * p.tpot_hi_s / p.tpot_s;
      } else {
        const std::vector<PhaseResult>& all = f.stage == "prefill" ? p.prefill : p.decode;
        si = phase_seconds(all, f.phases, true);
        std::vector<PhaseResult> named;
        for (const PhaseResult& ph : all)
          if (std::find(f.phases.begin(), f.phases.end(), std::string(ph.phase.name)) != f.phases.end()) named.push_back(ph);
        const TimeRange tr = time_range(named, si, d.machine);
        lo = tr.lo, hi = tr.hi;
      }
    }
    if (!row.predicted_oom) row.predicted = si / unit;
    if (!row.predicted_oom && hi > 0) {
      row.has_range = true;
      row.predicted_low = lo / unit, row.predicted_high = hi / unit;
    }
    if (f.oom || row.predicted_oom) {
      row.matches_exactly = f.oom && row.predicted_oom;
    } else {
      row.relative_error = (row.predicted - f.value) / f.value;
      const double half_digit = 0.5 * std::pow(10.0, -f.decimals);
      row.matches_exactly = std::fabs(row.predicted - f.value) <= half_digit * (1 + 1e-9);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Ordering> orderings(const std::vector<ReproRow>& rows) {
  const auto same_column = [](const PublishedFigure& a, const PublishedFigure& b) {
    return a.source == b.source && a.metric == b.metric && a.unit == b.unit && a.context == b.context &&
           a.output == b.output && a.batch == b.batch && a.stage == b.stage &&
           (a.metric != ReproMetric::phase || a.phases == b.phases);
  };
  const auto counted = [](const ReproRow& r) { return !r.figure->oom && !r.predicted_oom && r.figure->comparable; };
  std::vector<Ordering> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!counted(rows[i])) continue;
    for (size_t j = i + 1; j < rows.size(); ++j) {
      const PublishedFigure &a = *rows[i].figure, &b = *rows[j].figure;
      if (!counted(rows[j]) || a.label == b.label || !same_column(a, b)) continue;
      // Half a unit of the coarser last printed digit: what the paper could tell apart.
      const double half = 0.5 * std::pow(10.0, -std::min(a.decimals, b.decimals));
      Ordering o;
      const bool a_lower = a.value <= b.value;
      o.lower = a_lower ? &rows[i] : &rows[j];
      o.higher = a_lower ? &rows[j] : &rows[i];
      o.published_tie = std::fabs(a.value - b.value) < half * (1 - 1e-9);
      o.predicted_tie = std::fabs(rows[i].predicted - rows[j].predicted) < half * (1 - 1e-9);
      o.reproduced = !o.published_tie && !o.predicted_tie && o.lower->predicted < o.higher->predicted;
      out.push_back(o);
    }
  }
  return out;
}

std::vector<std::string> paper_names() {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(library_dir()) / "papers";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> paper_scenarios(const std::string& paper) {
  const std::vector<std::string> papers = paper_names();
  if (!paper.empty() && std::find(papers.begin(), papers.end(), paper) == papers.end()) {
    throw_input_error("command line", 0, "paper",
                      "unknown paper '" + paper + "'" + suggestion(paper, papers) + "; available: " + join(papers));
  }
  std::vector<std::string> out;
  for (const std::string& p : papers) {
    if (!paper.empty() && p != paper) continue;
    const std::filesystem::path dir = std::filesystem::path(library_dir()) / "papers" / p;
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".yaml") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace kvsim
