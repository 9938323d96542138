#include "policies/phase_traffic.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/emu/counters.hpp"
#include "model/deployment.hpp"
#include "policies/phase_kernels.hpp"
#include "policies/registry.hpp"

namespace kvsim {
namespace {

ModelConfig probe_model(const TrafficShape& s) {
  ModelConfig m;
  m.name = "traffic-probe";
  m.description = "one fp32 layer for kvsim validate --device emu";
  m.family = "llama";
  m.layers = 1;
  m.query_heads = s.query_heads, m.kv_heads = s.kv_heads, m.head_dim = s.head_dim;
  m.hidden = s.query_heads * s.head_dim;
  m.ffn_hidden = 4 * m.hidden;
  m.vocab = 32000;
  m.max_context = int64_t(1) << 24;
  m.rope_theta = 1e4;
  m.dtype = DType::fp32;
  return m;
}

bool matches(const std::string& kernel, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return true;
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return kernel.compare(0, p.size(), p) == 0; });
}

std::string num(double v) {
  char b[32];
  if (v == 0) return "0";
  if (std::abs(v) >= 1e6) std::snprintf(b, sizeof b, "%.3gM", v / 1e6);
  else if (std::abs(v) >= 1e3) std::snprintf(b, sizeof b, "%.3gk", v / 1e3);
  else std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}
}  // namespace

std::vector<PhaseTrafficRow> phase_traffic(const GpuSpec& gpu, const HostSpec& host, const TrafficShape& shape,
                                           const std::vector<std::string>& only) {
  const ModelConfig m = probe_model(shape);
  const Calibration cal;
  const Deployment d = make_deployment(m, gpu, host, cal, {.weight_dtype = DType::fp32, .kv_dtype = DType::fp32});
  const StepShape st{1, shape.context, 0};
  std::vector<PhaseTrafficRow> rows;
  for (const PolicyEntry& e : policy_registry()) {
    const Policy& pol = e.cost_model();
    const std::string name(pol.name());
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    const PhaseKernelLinks links = e.phase_kernels ? e.phase_kernels() : PhaseKernelLinks{};
    ParamValues pv = pol.defaults();
    if (links.probe) links.probe(pv);  // values that give every linked phase work at the probe's shape
    PhaseList phases;
    pol.decode_attention(d, pv, st, phases);
    for (const Phase& ph : phases) {
      PhaseTrafficRow r;
      r.policy = name;
      r.phase = std::string(ph.name);
      r.kind = std::string(to_string(ph.kind));
      r.device = ph.device == Device::gpu ? "gpu" : ph.device == Device::cpu ? "cpu" : "pcie";
      r.probe_why = links.probe_why;
      const auto link = std::find_if(links.begin(), links.end(), [&](const PhaseKernelLink& l) { return l.phase == ph.name; });
      const double runs = link != links.end() && link->runs_per_step ? link->runs_per_step(pv) : 1.0;
      const double per = ph.repeat > 0 ? double(ph.repeat) : 1.0;
      r.model_bytes = (ph.device == Device::gpu ? ph.work.hbm_bytes : ph.work.h2d_bytes + ph.work.d2h_bytes) / per / runs;
      r.model_launches = ph.work.launches / per / runs;
      if (link == links.end()) {
        r.kernels = ph.device == Device::cpu  ? "a host phase (kernels/host; kvsim validate --device cpu)"
                    : ph.device == Device::pcie ? "a DMA copy (cudaMemcpyAsync; no kernel)"
                                                : "no CUDA kernel in kernels/ implements it yet";
        rows.push_back(r);
        continue;
      }
      r.linked = true;
      r.kernels = link->kernels;
      r.low = link->low, r.high = link->high, r.why = link->why;
      {
        emu::CountScope scope;
        emu::KeepSectorIds keep;
        link->run(d, pv, st, ph);
        r.counts = scope.counts();
      }
      // Only the launches the link names belong to the phase (a launcher may serve two phases).
      std::erase_if(r.counts.launches, [&](const emu::LaunchCounts& l) { return !matches(l.kernel, link->launches); });
      double host = 0;  // mapped pinned host sectors (a zero-copy gather): over the link, once per launch
      for (const emu::LaunchCounts& l : r.counts.launches) {
        r.kernel_names.push_back(l.kernel);
        host += 32.0 * double(l.host_sectors);
        // HBM, or pinned host for a zero-copy gather; a transfer phase counts only what crosses the link.
        r.dram_bytes += double(ph.device == Device::pcie ? 0 : l.unique_bytes()) + 32.0 * double(l.host_sectors);
        r.sector_bytes += double(l.sector_bytes());
        r.useful_bytes += double(l.useful_bytes());
        r.launches += 1;
      }
      // Several launches of one call whose sectors together fit the GPU's L2: a later launch finds what an
      // earlier one brought in (the split top-k's passes over a row, a merge re-reading the partials it
      // wrote), so DRAM sees each sector once for the call, not once per launch.
      if (r.counts.launches.size() > 1 && ph.device != Device::pcie) {
        std::vector<uint64_t> read, written;
        for (const emu::LaunchCounts& l : r.counts.launches) {
          read.insert(read.end(), l.read_sector_ids.begin(), l.read_sector_ids.end());
          written.insert(written.end(), l.written_sector_ids.begin(), l.written_sector_ids.end());
        }
        for (auto* v : {&read, &written}) {
          std::sort(v->begin(), v->end());
          v->erase(std::unique(v->begin(), v->end()), v->end());
        }
        const double call = 32.0 * double(read.size() + written.size());
        if (gpu.l2_bytes > 0 && call <= gpu.l2_bytes && call + host < r.dram_bytes) {
          r.dram_bytes = call + host;
          r.call_in_l2 = true;
        }
      }
      for (emu::LaunchCounts& l : r.counts.launches) l.read_sector_ids = {}, l.written_sector_ids = {};
      r.memsets = double(r.counts.memsets);
      r.host_syncs = double(r.counts.host_syncs);
      if (ph.device == Device::pcie) r.dram_bytes += double(r.counts.copy_bytes);  // cudaMemcpy[Async] bytes
      // Nothing charged and nothing moved (a transfer with no bytes at this shape) agrees exactly.
      r.ratio = r.model_bytes > 0 ? r.dram_bytes / r.model_bytes : r.dram_bytes == 0 ? 1 : 0;
      rows.push_back(r);
    }
  }
  return rows;
}

std::string phase_traffic_table(const std::vector<PhaseTrafficRow>& rows, const TrafficShape& s,
                                const std::string& priced_on) {
  const bool time = !priced_on.empty();
  std::ostringstream o;
  char b[768];
  std::snprintf(b, sizeof b,
                "kvsim validate --device emu: one layer, one sequence, fp32, %d query / %d KV heads of %d%s%s%s, "
                "context %.0f; per phase the model's bytes and launches beside the kernels' fetched 32-byte sectors, "
                "useful bytes, launches, memsets and host synchronizations (CUDA emulator)%s%s%s\n\n",
                s.query_heads, s.kv_heads, s.head_dim, s.model.empty() ? "" : " (", s.model.c_str(),
                s.model.empty() ? "" : ")", s.context, time ? "; each priced by the kernel time model on " : "",
                priced_on.c_str(),
                time ? " (us: the predicted call; of bound: the model's bytes at the datasheet bandwidth over it)" : "");
  o << b;
  const auto timed = [&](const PhaseTrafficRow& r) {
    if (!time) return std::string();
    char t[64];
    if (!r.linked) std::snprintf(t, sizeof t, " %9s %8s", "-", "-");
    else std::snprintf(t, sizeof t, " %9.4g %8.3g", r.predicted_s * 1e6, r.predicted_s > 0 ? r.bound_s / r.predicted_s : 0);
    return std::string(t);
  };
  std::snprintf(b, sizeof b, "%-11s %-17s %9s %7s %9s %9s %7s %6s %5s %5s %6s %6s%s  %s\n", "policy", "phase",
                "model B", "launch", "DRAM B", "request B", "useful", "launch", "mset", "sync", "ratio", "bound",
                time ? "        us of bound" : "", "kernels");
  o << b;
  for (const auto& r : rows) {
    if (!r.linked) {
      std::snprintf(b, sizeof b, "%-11s %-17s %9s %7s %9s %9s %7s %6s %5s %5s %6s %6s%s  %s\n", r.policy.c_str(),
                    r.phase.c_str(), num(r.model_bytes).c_str(), num(r.model_launches).c_str(), "-", "-", "-", "-", "-",
                    "-", "-", "-", timed(r).c_str(), r.kernels.c_str());
      o << b;
      continue;
    }
    char eff[16] = "      -";  // a plain copy requests no sectors
    if (r.sector_bytes > 0) std::snprintf(eff, sizeof eff, "%6.0f%%", 100 * r.useful_bytes / r.sector_bytes);
    std::snprintf(b, sizeof b, "%-11s %-17s %9s %7s %9s %9s %s %6.0f %5.0f %5.0f %6.2f %6s%s  %s\n",
                  r.policy.c_str(), r.phase.c_str(), num(r.model_bytes).c_str(), num(r.model_launches).c_str(),
                  (num(r.dram_bytes) + (r.call_in_l2 ? "*" : "")).c_str(), num(r.sector_bytes).c_str(), eff, r.launches, r.memsets,
                  r.host_syncs, r.ratio, r.within() ? "ok" : "OUT", timed(r).c_str(), r.kernels.c_str());
    o << b;
    if (!r.why.empty()) {
      std::snprintf(b, sizeof b, "%-29s allowed ratio [%.2g, %.2g]: %s\n", "", r.low, r.high, r.why.c_str());
      o << b;
    }
  }
  std::string probes;
  for (const auto& r : rows)
    if (!r.probe_why.empty() && probes.find(r.probe_why) == std::string::npos) probes += "\n" + r.probe_why + ".";
  if (!probes.empty()) o << probes << "\n";
  o << "\nDRAM B = distinct 32-byte sectors the kernels touched (DRAM traffic when a launch's working set fits L2; "
       "* = counted once for the whole call, whose launches' sectors together fit the GPU's L2); "
       "request B = sectors of every warp-level request (repeats count); useful = bytes the lanes asked for / request "
       "B; ratio = DRAM B / model B; bound: within the link's allowed range (+-10% unless explained).\n";
  return o.str();
}

std::string phase_traffic_json(const std::vector<PhaseTrafficRow>& rows, const TrafficShape& s,
                               const std::string& priced_on) {
  const bool time = !priced_on.empty();
  nlohmann::json j;
  j["schema"] = "kvsim.phase_traffic/1";
  j["shape"] = {{"query_heads", s.query_heads}, {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim},
                {"context", s.context}, {"layers", 1}, {"batch", 1}, {"dtype", "fp32"}};
  if (!s.model.empty()) j["shape"]["model"] = s.model;
  if (time) j["priced_on"] = priced_on;
  for (const auto& r : rows) {
    nlohmann::json x = {{"policy", r.policy}, {"phase", r.phase}, {"kind", r.kind}, {"device", r.device},
                        {"linked", r.linked}, {"kernels", r.kernels}, {"model_bytes", r.model_bytes},
                        {"model_launches", r.model_launches}};
    if (!r.probe_why.empty()) x["probe_params"] = r.probe_why;
    if (r.linked) {
      x["dram_bytes"] = r.dram_bytes;
      x["request_sector_bytes"] = r.sector_bytes;
      x["useful_bytes"] = r.useful_bytes;
      x["launches"] = r.launches;
      x["memsets"] = r.memsets;
      x["host_syncs"] = r.host_syncs;
      x["kernel_launches"] = r.kernel_names;
      x["ratio"] = r.ratio;
      x["dram_counted_per"] = r.call_in_l2 ? "call" : "launch";
      x["allowed"] = {r.low, r.high};
      x["within"] = r.within();
      if (!r.why.empty()) x["why"] = r.why;
      if (time) {
        x["predicted_s"] = r.predicted_s;
        x["bound_s"] = r.bound_s;
        x["fraction_of_bound"] = r.predicted_s > 0 ? r.bound_s / r.predicted_s : 0;
        x["time_bound"] = r.time_bound;
      }
    }
    j["phases"].push_back(x);
  }
  return j.dump(2) + "\n";
}

}  // namespace kvsim
