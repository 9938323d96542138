#include "model/host_ops.hpp"

#include <algorithm>
#include <cmath>

#include "core/format.hpp"
#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "model/library.hpp"

namespace kvsim {

namespace {
HostOpsPhase read_phase(YamlMap m, const std::string& name) {
  HostOpsPhase p;
  p.name = name;
  p.ops_per_layer = m.number("ops_per_layer", Range::between(0, 1e5), 0.0);
  p.fixed_s = m.number("fixed_us", Range::between(0, 1e7)) * 1e-6;
  const YAML::Node pts = m.node("points");
  if (!pts || !pts.IsSequence() || pts.size() == 0)
    m.fail("points", "must be a non-empty list of [bytes per layer, GB/s per thread] pairs");
  auto& curve = p.rate_per_thread.points;
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string key = "points[" + std::to_string(i) + "]";
    if (!pts[i].IsSequence() || pts[i].size() != 2) m.fail(key, "must be a pair [bytes per layer, GB/s per thread]");
    const double x = m.parse_number(pts[i][0], key + ".bytes", Range::positive());
    const double r = m.parse_number(pts[i][1], key + ".gbs_per_thread", Range::positive(1e4)) * kGB;
    if (!curve.empty() && x <= curve.back().first)
      m.fail(key, "bytes = " + format_number(x) + " must be greater than the previous point's " +
                      format_number(curve.back().first) + " (points sorted by bytes, each once)");
    curve.emplace_back(x, r);
  }
  m.finish();
  return p;
}
}  // namespace

const HostOpsPhase* HostOpsProfile::find(std::string_view phase) const {
  for (const auto& p : phases)
    if (p.name == phase) return &p;
  return nullptr;
}

HostOpsProfile load_host_ops_file(const std::string& path) {
  YamlMap m(load_yaml_file(path), path, "");
  HostOpsProfile h;
  (void)m.choice("schema", {"kvsim.host_profile/1"});
  h.name = m.string("name");
  h.framework = m.string("framework", "");
  const YAML::Node on = m.node("measured_on");
  if (!on || !on.IsScalar()) m.fail("measured_on", "expected the name of the host it was measured on (scenarios/hosts/)");
  h.measured_on = load_host_file(resolve(LibraryKind::host, on.Scalar(), path, m.line_of("measured_on"),
                                         m.field("measured_on")));
  h.threads = int(m.integer("threads", Range::between(1, 4096)));
  if (m.has("thread_scaling")) {
    YamlMap t = m.map("thread_scaling");
    (void)t.choice("law", {"usl"});
    h.scaling.sigma = t.number("sigma", Range::between(0, 1));
    h.scaling.kappa = t.number("kappa", Range::between(0, 1));
    h.scaling.source = t.string("source");
    if (t.has("slow")) {
      YamlMap sl = t.map("slow");
      h.scaling.has_slow = true;
      h.scaling.slow_sigma = sl.number("sigma", Range::between(0, 1));
      h.scaling.slow_kappa = sl.number("kappa", Range::between(0, 1));
      h.scaling.slow_source = sl.string("source");
      sl.finish();
    } else {
      t.node("slow");
    }
    t.finish();
  } else {
    m.node("thread_scaling");
  }
  (void)m.number("dram_gbs", Range::positive(1e5), 0.0);  // the measurement's own ceiling, for the record
  const YAML::Node phases = m.node("phases");
  if (!phases || !phases.IsMap() || phases.size() == 0)
    m.fail("phases", "must map at least one host phase name to its ops_per_layer, fixed_us and points");
  for (const auto& kv : phases) {
    const std::string name = kv.first.as<std::string>();
    if (!kv.second.IsMap()) m.fail("phases." + name, "expected a mapping (ops_per_layer, fixed_us, points)");
    h.phases.push_back(read_phase(YamlMap(kv.second, path, "phases." + name), name));
  }
  m.finish();
  return h;
}

double ThreadScaling::team(double cores, double n0) const {
  double n = cores;
  if (kappa > 0) n = std::min(n, std::max(n0, std::sqrt((1 - sigma) / kappa)));
  return std::max(1.0, n);
}

double ThreadScaling::gain(double cores, double n0) const {
  const double n = team(cores, n0);
  return throughput(n) / throughput(n0);
}

double ThreadScaling::slow_gain(double cores, double n0) const {
  ThreadScaling slow;  // the slow fit alone (no source, no slow end of its own)
  slow.sigma = slow_sigma, slow.kappa = slow_kappa;
  return slow.gain(cores, n0);
}

double HostOpsOnTarget::rate(const HostOpsPhase& p, double bytes, double cores, double dram, bool* outside) const {
  const double per_thread = p.rate_per_thread.at(bytes, outside) / rate_time_scale;
  const ThreadScaling& law = profile->scaling;
  return std::min(dram, profile->threads * per_thread * law.gain(cores, profile->threads));
}

std::string host_ops_note(const HostOpsOnTarget& t, double cores, double dram) {
  const HostOpsProfile& p = *t.profile;
  std::string names;
  for (const auto& ph : p.phases) names += (names.empty() ? "" : ", ") + ph.name;
  std::string s = "host phases " + names + " run as framework operators (" + p.name + ": " + p.framework +
                  ", measured on " + p.measured_on.name + " with " + std::to_string(p.threads) +
                  " threads), scaled to " + format_number(cores) + " cores, " + format_number(dram / kGB) +
                  " GB/s of DRAM and ";
  s += t.clock_known ? "a clock " + fmt("%.2f", 1 / t.time_scale) + "x the measuring host's"
                     : "the measuring host's clock (a clock_ghz is missing, so not scaled by clock)";
  const ThreadScaling& law = p.scaling;
  if (law.sigma > 0 || law.kappa > 0) {
    s += "; threads by the universal scalability law (sigma " + fmt("%.3g", law.sigma) + ", kappa " +
         fmt("%.3g", law.kappa) + ", " + law.source + "): a team of " + fmt("%.0f", law.team(cores, p.threads)) +
         " threads runs at " + fmt("%.2f", law.gain(cores, p.threads)) +
         "x the measured " + std::to_string(p.threads) + " threads' rate";
  } else {
    s += "; threads linear in cores (the profile gives no thread_scaling law)";
  }
  s += t.all_core_known ? ", at an all-core clock " + fmt("%.2f", 1 / t.rate_time_scale) + "x the measuring host's"
                        : ", at the single-core clocks (an all_core_clock_ghz is missing)";
  return s;
}

}  // namespace kvsim
