#include "report/tables.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace kvsim::report {

using json = nlohmann::json;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A number in printf format `f` times `scale`; "-" for null or a missing field.
std::string num(const json& v, const char* f, double scale = 1) {
  if (!v.is_number()) return "-";
  char b[48];
  std::snprintf(b, sizeof b, f, v.get<double>() * scale);
  return b;
}
std::string text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}
const json& field(const json& j, const char* k) {
  static const json null;
  return j.is_object() && j.contains(k) ? j[k] : null;
}

// One table: a header row and rows of cells (already text; escaped here), each row optionally followed
// by lines that span the table (the CLI's indented lines under a policy's row).
std::string table(const std::string& cls, const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows,
                  const std::vector<std::vector<std::string>>& under = {}) {
  std::string t = "<table class=\"" + cls + "\"><thead><tr>";
  for (const std::string& h : head) t += "<th>" + html_escape(h) + "</th>";
  t += "</tr></thead><tbody>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    t += "<tr>";
    for (const std::string& c : rows[i]) t += "<td>" + html_escape(c) + "</td>";
    t += "</tr>\n";
    if (i < under.size())
      for (const std::string& line : under[i])
        t += "<tr class=\"under\"><td colspan=\"" + std::to_string(head.size()) + "\">" + html_escape(line) + "</td></tr>\n";
  }
  return t + "</tbody></table>\n";
}

// The CLI's lines under a plan result: why it is infeasible, its figures at full KV's batch, its index
// in HBM, the overlap of a simulated step, and the estimate against the roofline bound.
std::vector<std::string> plan_lines(const json& r, const json& plan) {
  std::vector<std::string> lines;
  if (!r["feasible"].get<bool>()) lines.push_back("infeasible: " + text(field(r, "reason")));
  // The 80% range (docs/uncertainty.md), as the CLI prints it under the row; absent in plans written
  // before the ranges.
  const json& ev = field(r, "tpot_evidence");
  if (field(r, "tpot_ms_high").is_number() && ev.is_object())
    lines.push_back("80% range (docs/uncertainty.md): TPOT " + num(field(r, "tpot_ms_low"), "%.3f") + "-" +
                    num(field(r, "tpot_ms_high"), "%.3f") + " ms, TTFT " + num(field(r, "ttft_ms_low"), "%.1f") + "-" +
                    num(field(r, "ttft_ms_high"), "%.1f") + " ms, " + num(field(r, "throughput_tok_s_low"), "%.1f") + "-" +
                    num(field(r, "throughput_tok_s_high"), "%.1f") + " tok/s/GPU; decode time by evidence: curves " +
                    num(field(ev, "curve"), "%.0f", 100) + "%, kernel models " + num(field(ev, "kernel_model"), "%.0f", 100) +
                    "%, host thread law " + num(field(ev, "host_law"), "%.0f", 100) + "%, none " +
                    num(field(ev, "none"), "%.0f", 100) + "%");
  const json& a = field(r, "at_full_batch");
  if (a.is_object() && field(a, "batch") != r["batch"]) {
    const std::string tp = num(field(field(plan, "workload"), "tensor_parallel"), "%.0f");
    if (field(a, "feasible") == true)
      lines.push_back("at full KV's batch " + num(field(a, "batch"), "%.0f") + " (TP " + tp + "): TPOT " +
                      num(field(a, "tpot_ms"), "%.3f") + " ms, " + num(field(a, "throughput_tok_s"), "%.1f") + " tok/s/GPU, " +
                      num(field(a, "throughput_vs_full"), "%.2fx") + " full's throughput (at its own batch " +
                      num(r["batch"], "%.0f") + ": " + num(field(field(r, "vs_full"), "throughput"), "%.2fx") + ")");
    else
      lines.push_back("at full KV's batch " + num(field(a, "batch"), "%.0f") + " (TP " + tp + "): infeasible: " +
                      text(field(a, "reason")));
  }
  const json& m = r["memory"];
  if (field(m, "index_hbm_bytes_per_seq_layer").is_number() && m["index_hbm_bytes_per_seq_layer"].get<double>() > 0)
    lines.push_back("index in HBM: " + num(m["index_hbm_bytes_per_seq_layer"], "%.2f", 1 / (1024.0 * 1024.0)) +
                    " MiB per sequence per layer, " + num(field(m, "index_hbm_bytes"), "%.2f", 1 / kGiB) + " GiB at batch " +
                    num(r["batch"], "%.0f") + " over all layers");
  const json& serial = field(r, "decode_serial_ms");
  if (field(r, "simulated") == true && serial.is_number() && serial.get<double>() > 0 && r["tpot_ms"].is_number())
    lines.push_back("simulated step " + num(r["tpot_ms"], "%.3f") + " ms; phases alone sum to " + num(serial, "%.3f") +
                    " ms (overlap hides " +
                    num(json(std::max(0.0, 100 * (1 - r["tpot_ms"].get<double>() / serial.get<double>()))), "%.0f") + "%)");
  const json& bound = field(r, "bound");
  if (field(bound, "tpot_ms").is_number() && r["tpot_ms"].is_number() && bound["tpot_ms"].get<double>() > 0)
    lines.push_back("roofline bound: TPOT " + num(bound["tpot_ms"], "%.3f") + " ms, TTFT " + num(field(bound, "ttft_ms"), "%.1f") +
                    " ms, " + num(field(bound, "throughput_tok_s"), "%.1f") + " tok/s/GPU (estimate / bound: TPOT " +
                    num(json(r["tpot_ms"].get<double>() / bound["tpot_ms"].get<double>()), "%.2fx") + ")");
  return lines;
}

}  // namespace

std::string plan_table(const json& plan) {
  std::vector<std::vector<std::string>> rows, under;
  for (const json& r : plan["results"]) {
    under.push_back(plan_lines(r, plan));
    const json& m = r["memory"];
    const json& vs = field(r, "vs_full");
    const json& bound = field(r, "bound");
    const double kv = m["kv_hbm_bytes"].get<double>() + m["kv_dram_bytes"].get<double>();
    rows.push_back({std::to_string(r["context_tokens"].get<int64_t>()), r["policy"].get<std::string>(),
                    std::to_string(r["batch"].get<int64_t>()), num(m["max_batch"], "%.0f"), num(r["tpot_ms"], "%.3f"),
                    num(r["ttft_ms"], "%.1f"), num(r["throughput_tok_s"], "%.1f"), num(field(vs, "throughput"), "%.2fx"),
                    num(field(vs, "kv_hbm_per_seq"), "%.3f"), num(m["hbm_bytes"], "%.2f", 1 / kGiB),
                    num(json(kv), "%.2f", 1 / kGiB), r["feasible"].get<bool>() ? text(field(r, "dominant_bound")) : "infeasible",
                    num(field(bound, "tpot_ms"), "%.3f")});
  }
  return table("plan", {"context", "policy", "batch", "max", "TPOT ms", "TTFT ms", "tok/s/GPU", "xput/full", "KV/full",
                        "HBM GiB", "KV GiB", "bound", "roofline TPOT ms"},
               rows, under);
}

std::string serve_table(const json& serve) {
  std::vector<std::vector<std::string>> rows;
  for (const json& p : serve["policies"]) {
    rows.push_back({p["policy"].get<std::string>(), num(p["ttft_s"]["p50"], "%.1f", 1e3), num(p["ttft_s"]["p99"], "%.1f", 1e3),
                    num(p["tpot_s"]["p50"], "%.1f", 1e3), num(p["tpot_s"]["p99"], "%.1f", 1e3),
                    num(p["e2e_s"]["p50"], "%.3g"), num(p["e2e_s"]["p99"], "%.3g"), num(p["throughput_tok_s"], "%.0f"),
                    num(p["goodput_rate"], "%.3g"), num(p["mean_batch"], "%.1f"), num(p["preemptions"], "%.0f"),
                    num(p["rejected"], "%.0f"), p["overloaded"].get<bool>() ? "OVERLOADED" : ""});
  }
  return table("serve", {"policy", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "E2E p50 s", "E2E p99 s",
                         "tok/s", "goodput req/s", "batch mean", "preempt", "reject", ""},
               rows);
}

std::string replay_table(const json& replay) {
  std::vector<std::vector<std::string>> rows;
  for (const json& p : replay["policies"]) {
    const json& q = p["quality"];
    const json& an = field(p["plan"], "analytical");
    const json& me = field(p["plan"], "measured");
    std::string carried;
    for (const json& c : field(p, "carried"))
      carried += (carried.empty() ? "" : ", ") + text(field(c, "param")) + " " + num(field(c, "measured"), "%.4g") +
                 " -> " + num(field(c, "applied"), "%.4g");
    rows.push_back({p["label"].get<std::string>(), num(field(field(q, "attention_recall"), "mean"), "%.4f"),
                    num(field(field(q, "attention_recall"), "p10"), "%.4f"), num(field(field(q, "output_error"), "mean"), "%.4f"),
                    num(field(field(q, "output_error"), "p90"), "%.4f"), num(field(field(q, "topk_recall"), "mean"), "%.3f"),
                    num(field(field(q, "tokens_attended"), "mean"), "%.1f"), num(field(an, "tpot_s"), "%.3f", 1e3),
                    num(field(me, "tpot_s"), "%.3f", 1e3), num(field(p["plan"], "tpot_change"), "%+.1f%%", 100),
                    num(field(me, "throughput_tok_s"), "%.0f"), carried.empty() ? "-" : carried});
  }
  return table("replay", {"policy", "recall", "rec.p10", "err", "err.p90", "top-k", "tokens", "TPOT an.ms", "TPOT me.ms",
                          "change", "tok/s", "carried (measured -> applied)"},
               rows);
}

std::string pareto_table(const json& pareto) {
  const std::vector<std::string> cols = pareto["columns"].get<std::vector<std::string>>();
  auto index = [&](const std::string& c) { return int(std::find(cols.begin(), cols.end(), c) - cols.begin()); };
  // The sweep's axes and knobs sit between `policy` and `params` in a results file.
  const int from = index("policy") + 1, to = std::min(index("params"), int(cols.size()));
  std::vector<std::string> head = {"front", "policy"};
  for (int c = from; c < to; ++c) head.push_back(cols[size_t(c)]);
  for (const char* h : {"batch", "TPOT ms", "tok/s/GPU"}) head.push_back(h);
  const int batch = index("batch"), tpot = index("tpot_s"), xput = index("throughput_tok_s");
  std::vector<std::vector<std::string>> rows;
  for (const json& r : pareto["rows"]) {
    std::vector<std::string> row = {text(r[size_t(index("front"))]), text(r[size_t(index("policy"))])};
    for (int c = from; c < to; ++c) row.push_back(r[size_t(c)].is_number() ? num(r[size_t(c)], "%.10g") : text(r[size_t(c)]));
    row.push_back(batch < int(cols.size()) ? num(r[size_t(batch)], "%.0f") : "-");
    row.push_back(num(r[size_t(tpot)], "%.3f", 1e3));
    row.push_back(num(r[size_t(xput)], "%.1f"));
    rows.push_back(std::move(row));
  }
  return table("pareto", head, rows);
}

// The calibration lines always in view; the per-result warnings below them in a box of their own,
// counted by kind in its summary line.
std::string warnings_list(const json& warnings) {
  auto item = [](const json& w) {
    return "<li class=\"warning " + html_escape(w["kind"].get<std::string>()) + "\"><b>" +
           html_escape(w["kind"].get<std::string>()) + "</b> (" + html_escape(w["source"].get<std::string>()) + "): " +
           html_escape(w["text"].get<std::string>()) + "</li>\n";
  };
  std::string head = "<ul class=\"warnings calibration\">\n", rest;
  std::vector<std::pair<std::string, int>> counts;
  for (const json& w : warnings) {
    const std::string kind = w["kind"].get<std::string>();
    if (kind == "calibration") {
      head += item(w);
      continue;
    }
    rest += item(w);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == kind; });
    if (it == counts.end()) counts.push_back({kind, 1});
    else ++it->second;
  }
  head += "</ul>\n";
  if (rest.empty()) return head;
  std::string summary;
  for (const auto& [kind, n] : counts) summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  return head + "<details open><summary>" + html_escape(summary) + "</summary>\n<ul class=\"warnings\">\n" + rest +
         "</ul></details>\n";
}

}  // namespace kvsim::report
