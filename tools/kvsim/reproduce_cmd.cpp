#include "tools/kvsim/reproduce_cmd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/csv.hpp"
#include "model/report.hpp"
#include "model/reproduction.hpp"
#include "policies/registry.hpp"

namespace kvsim {

struct ReproduceCommand {
  CLI::App* cmd = nullptr;
  std::string paper, format = "table", out;
  std::vector<std::string> files;
};

namespace {

using json = nlohmann::json;

struct Loaded {
  Reproduction r;
  std::vector<ReproRow> rows;
};

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::max(0, decimals), v);
  return buf;
}

std::string published_text(const PublishedFigure& f) { return f.oom ? "OOM" : fixed(f.value, f.decimals); }
std::string predicted_text(const ReproRow& row) {
  // One digit more than the paper printed, so an exact match shows as such.
  return row.predicted_oom ? "OOM" : fixed(row.predicted, row.figure->decimals + 1);
}
std::string error_text(const ReproRow& row) {
  const PublishedFigure& f = *row.figure;
  if (f.oom || row.predicted_oom) return row.matches_exactly ? "both OOM" : "OOM mismatch";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * row.relative_error);
  std::string s = buf;
  if (f.exact) s += row.matches_exactly ? "  exact" : "  NOT EXACT";
  if (f.approximate) s += "  (printed '" + f.printed + "')";
  if (!f.comparable) s += "  (not comparable: see its note)";
  return s;
}

// A series: consecutive rows of one file with the same source, label, metric and unit.
bool same_series(const ReproRow& a, const ReproRow& b) {
  const PublishedFigure &x = *a.figure, &y = *b.figure;
  return x.source == y.source && x.label == y.label && x.metric == y.metric && x.unit == y.unit &&
         x.output == y.output && x.phases == y.phases;
}

// Growth from the first to the last numeric point of each multi-point series: the shape check.
std::vector<std::string> growth_lines(const std::vector<ReproRow>& rows) {
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && same_series(rows[i], rows[j])) ++j;
    const ReproRow *first = nullptr, *last = nullptr;
    for (size_t k = i; k < j; ++k) {
      if (rows[k].figure->oom || rows[k].predicted_oom) continue;
      if (!first) first = &rows[k];
      last = &rows[k];
    }
    if (first && last && first != last && !first->figure->exact) {
      const PublishedFigure &a = *first->figure, &b = *last->figure;
      // Ratio last/first, and the slope per 1K tokens of context (in the figure's unit).
      const double dk = double(b.context - a.context) / 1000.0;
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "  shape %-8s %-16s %-9s %7lld -> %-7lld published x%.2f (%+.4g %s/1K tok), predicted x%.2f (%+.4g)",
                    a.source.c_str(), a.label.c_str(), to_string(a.metric), (long long)a.context, (long long)b.context,
                    b.value / a.value, (b.value - a.value) / dk, a.unit.c_str(), last->predicted / first->predicted,
                    (last->predicted - first->predicted) / dk);
      out.push_back(buf);
    }
    i = j;
  }
  return out;
}

// Each published tie and each ordering not reproduced, one line each (the reproduced ones are the
// count in the summary).
std::vector<std::string> order_lines(const std::vector<Ordering>& orders) {
  std::vector<std::string> out;
  for (const Ordering& o : orders) {
    if (o.reproduced) continue;
    const PublishedFigure &lo = *o.lower->figure, &hi = *o.higher->figure;
    const std::string where = "  order " + lo.source + " " + to_string(lo.metric) + " " + lo.unit + " at " +
                              std::to_string(lo.context) + ": ";
    if (o.published_tie) {
      out.push_back(where + "published " + lo.label + " " + published_text(lo) + " = " + hi.label + " " +
                    published_text(hi) + ", a tie: not an ordering, not counted");
      continue;
    }
    out.push_back(where + "published " + lo.label + " " + published_text(lo) + " < " + hi.label + " " +
                  published_text(hi) + "; predicted " + predicted_text(*o.lower) +
                  (o.predicted_tie ? " ~ " : " > ") + predicted_text(*o.higher) +
                  (o.predicted_tie ? " (a tie at the printed digits): not reproduced" : ": not reproduced"));
  }
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Summary: exact figures matched; approximate ones (the paper's "around N": their error is the
// paper's rounding) on their own; OOM rows; the median absolute error of the rest, over every figure
// and over the comparable ones alone (figures marked comparable: false measure another
// configuration; their notes say which); published orderings reproduced, ties not counted.
std::string summary_line(const std::vector<Loaded>& all) {
  int exact = 0, exact_ok = 0, oom = 0, oom_ok = 0, orders = 0, orders_ok = 0, ties = 0;
  std::vector<double> errs, comparable, approximate;
  for (const Loaded& l : all) {
    for (const ReproRow& row : l.rows) {
      if (row.figure->oom || row.predicted_oom) { ++oom; oom_ok += row.matches_exactly; }
      else if (row.figure->exact) { ++exact; exact_ok += row.matches_exactly; }
      else if (row.figure->approximate) approximate.push_back(std::fabs(row.relative_error));
      else {
        errs.push_back(std::fabs(row.relative_error));
        if (row.figure->comparable) comparable.push_back(errs.back());
      }
    }
    for (const Ordering& o : orderings(l.rows)) {
      if (o.published_tie) { ++ties; continue; }
      ++orders;
      orders_ok += o.reproduced;
    }
  }
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "summary: %d/%d exact memory figures match to the printed digit; %zu approximate memory figures "
                "('around N'), median |error| %.1f%%; %d/%d OOM rows agree; "
                "%zu other figures, median |error| %.1f%%; %zu of them comparable, median |error| %.1f%%; "
                "%d/%d published orderings reproduced (%d published ties, not orderings)\n",
                exact_ok, exact, approximate.size(), 100 * median_of(approximate), oom_ok, oom, errs.size(),
                100 * median_of(errs), comparable.size(), 100 * median_of(comparable), orders_ok, orders, ties);
  std::string out = buf;
  // The ranges (model/uncertainty.hpp): over the comparable time and throughput figures, how often the
  // published value lies in the 80% range, and the median half-width relative to the estimate.
  int ranged = 0, covered = 0;
  std::vector<double> half;
  for (const Loaded& l : all)
    for (const ReproRow& row : l.rows) {
      if (!row.has_range || !row.figure->comparable || row.figure->oom || row.figure->exact || row.figure->approximate) continue;
      ++ranged;
      const double v = row.figure->value;
      covered += v >= row.predicted_low * (1 - 1e-9) && v <= row.predicted_high * (1 + 1e-9);
      half.push_back(0.5 * (row.predicted_high - row.predicted_low) / row.predicted);
    }
  if (ranged > 0) {
    std::snprintf(buf, sizeof buf,
                  "ranges: the published value lies in the 80%% range for %d of %d comparable time and throughput figures "
                  "(%.0f%%); median half-width %.1f%% of the estimate\n",
                  covered, ranged, 100.0 * covered / ranged, 100 * median_of(half));
    out += buf;
  }
  return out;
}

std::string table(const std::vector<Loaded>& all) {
  std::string s;
  char buf[512];
  for (const Loaded& l : all) {
    const Scenario& sc = l.r.scenario;
    s += l.r.paper + ": " + l.r.title + "\n  " + l.r.file + "\n";
    std::snprintf(buf, sizeof buf, "  %s + %s, %s; prefill %s, cuda graphs %s%s\n", sc.gpu.name.c_str(),
                  sc.host.name.c_str(), sc.model.name.c_str(),
                  sc.implementation.prefill_whole_prompt ? "whole prompt" : "chunked", sc.workload.cuda_graphs ? "on" : "off",
                  sc.implementation.kv_expand_gqa ? ", KV expanded to all query heads" : "");
    s += buf;
    std::snprintf(buf, sizeof buf, "  %-9s %-16s %-13s %8s %6s %12s %12s  %s\n", "source", "row", "metric", "context",
                  "output", "published", "predicted", "error");
    s += buf;
    for (const ReproRow& row : l.rows) {
      const PublishedFigure& f = *row.figure;
      const std::string metric = std::string(to_string(f.metric)) + " " + f.unit;
      std::snprintf(buf, sizeof buf, "  %-9s %-16s %-13s %8lld %6lld %12s %12s  %s\n", f.source.c_str(), f.label.c_str(),
                    metric.c_str(), (long long)f.context, (long long)f.output, published_text(f).c_str(),
                    predicted_text(row).c_str(), error_text(row).c_str());
      s += buf;
      if (row.has_range) {  // the 80% range, at the predicted figure's digits, on the same line
        s.pop_back();
        s += "  (80% range " + fixed(row.predicted_low, f.decimals + 1) + "-" + fixed(row.predicted_high, f.decimals + 1) + ")\n";
      }
    }
    for (const std::string& g : growth_lines(l.rows)) s += g + "\n";
    for (const std::string& g : order_lines(orderings(l.rows))) s += g + "\n";
    s += "\n";
  }
  return s + summary_line(all);
}

json to_json(const std::vector<Loaded>& all) {
  json rows = json::array();
  for (const Loaded& l : all)
    for (const ReproRow& row : l.rows) {
      const PublishedFigure& f = *row.figure;
      rows.push_back({{"paper", l.r.paper},
                      {"file", l.r.file},
                      {"source", f.source},
                      {"row", f.label},
                      {"policy", f.policy},
                      {"metric", to_string(f.metric)},
                      {"unit", f.unit},
                      {"phases", f.phases},
                      {"context_tokens", f.context},
                      {"output_tokens", f.output},
                      {"batch", f.batch},
                      {"published", f.oom ? json("OOM") : json(f.value)},
                      {"published_decimals", f.decimals},
                      {"predicted", row.predicted_oom ? json("OOM") : json(row.predicted)},
                      {"predicted_low", row.has_range ? json(row.predicted_low) : json(nullptr)},
                      {"predicted_high", row.has_range ? json(row.predicted_high) : json(nullptr)},
                      {"relative_error", (f.oom || row.predicted_oom) ? json(nullptr) : json(row.relative_error)},
                      {"exact", f.exact},
                      {"matches_exactly", row.matches_exactly},
                      {"printed", f.printed},
                      {"approximate", f.approximate},
                      {"infeasible_reason", row.oom_reason},
                      {"note", f.note},
                      {"comparable", f.comparable}});
    }
  return rows;
}

std::string to_csv(const std::vector<Loaded>& all) {
  std::string s = "paper,file,source,row,policy,metric,unit,context_tokens,output_tokens,batch,published,predicted,relative_error,exact,matches_exactly,comparable\n";
  char buf[64];
  for (const Loaded& l : all)
    for (const ReproRow& row : l.rows) {
      const PublishedFigure& f = *row.figure;
      std::snprintf(buf, sizeof buf, "%.10g", row.relative_error);
      const std::string err = (f.oom || row.predicted_oom) ? "" : buf;
      std::snprintf(buf, sizeof buf, "%.10g", row.predicted);
      const std::string pred = row.predicted_oom ? "OOM" : buf;
      s += csv_field(l.r.paper) + "," + csv_field(l.r.file) + "," + csv_field(f.source) + "," + csv_field(f.label) + "," +
           f.policy + "," + to_string(f.metric) + "," + f.unit + "," + std::to_string(f.context) + "," +
           std::to_string(f.output) + "," + std::to_string(f.batch) + "," + published_text(f) + "," + pred + "," + err +
           "," + (f.exact ? "true" : "false") + "," + (row.matches_exactly ? "true" : "false") + "," +
           (f.comparable ? "true" : "false") + "\n";
    }
  return s;
}

}  // namespace

ReproduceCommand* add_reproduce_command(CLI::App& app) {
  static ReproduceCommand cmd;
  ReproduceCommand* c = &cmd;
  c->cmd = app.add_subcommand("reproduce", "predict each seed paper's published system results, next to the published numbers");
  c->cmd->add_option("paper", c->paper, "paper (sentencekv, chunkkv, sekv); default: all");
  c->cmd->add_option("--file", c->files, "a paper scenario YAML instead of the library's (repeatable)");
  c->cmd->add_option("--format", c->format, "output format")->check(CLI::IsMember({"table", "json", "csv"}));
  c->cmd->add_option("-o,--out", c->out, "write to FILE (atomically) instead of standard output");
  return c;
}

int run_reproduce_command(ReproduceCommand& c) {
  if (!c.cmd->parsed()) return -1;
  const std::vector<std::string> files = c.files.empty() ? paper_scenarios(c.paper) : c.files;
  std::vector<Loaded> all;
  all.reserve(files.size());
  for (const std::string& f : files) {
    all.push_back({load_reproduction_file(f, policy_catalog()), {}});
    all.back().rows = reproduce(all.back().r);
  }
  std::string text = c.format == "json" ? to_json(all).dump(2) + "\n" : c.format == "csv" ? to_csv(all) : table(all);
  if (c.out.empty()) std::fwrite(text.data(), 1, text.size(), stdout);
  else write_file_atomic(c.out, text);
  return 0;
}

}  // namespace kvsim
