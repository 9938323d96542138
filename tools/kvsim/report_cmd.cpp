#include "tools/kvsim/report_cmd.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "report/report.hpp"

namespace kvsim {

struct ReportCommand {
  CLI::App* cmd = nullptr;
  std::string plan, sweep, pareto, serve, requests, series, replay, scenario, out;
};

ReportCommand* add_report_command(CLI::App& app) {
  static ReportCommand command;  // lives for the process, as the other commands' state does
  ReportCommand* c = &command;
  c->cmd = app.add_subcommand("report", "one self-contained HTML page (tables, interactive charts, warnings) from "
                                        "plan, sweep, serve or replay outputs, or a scenario");
  c->cmd->add_option("--plan", c->plan, "`kvsim plan --format json` output");
  c->cmd->add_option("--sweep", c->sweep, "`kvsim sweep -o` results CSV (its .pareto.csv beside it is read too)");
  c->cmd->add_option("--pareto", c->pareto, "the sweep's Pareto CSV (default: RESULTS.pareto.csv when it exists)");
  c->cmd->add_option("--serve", c->serve, "`kvsim serve --format json` summary");
  c->cmd->add_option("--requests", c->requests, "`kvsim serve --requests-csv` file (latency CDFs)");
  c->cmd->add_option("--series", c->series, "`kvsim serve --series` file (queue and batch over time)");
  c->cmd->add_option("--replay", c->replay, "`kvsim replay --format json` output");
  c->cmd->add_option("--scenario", c->scenario, "run this scenario (plan, and serve when it has a serving: block)");
  c->cmd->add_option("-o,--out", c->out, "write the page to FILE (atomically) instead of standard output");
  return c;
}

int run_report_command(ReportCommand& c) {
  if (!c.cmd->parsed()) return -1;
  report::ReportInputs in;
  if (!c.scenario.empty()) {
    if (!c.plan.empty() || !c.serve.empty())
      throw_input_error("command line", 0, "--scenario",
                        "runs its own plan and serve; allowed: --scenario without --plan and --serve");
    in = report::run_scenario(load_scenario_file(c.scenario, policy_catalog(), Overrides{}));
  }
  auto read = [](const std::string& path, const char* option, std::optional<report::Source>& into) {
    if (!path.empty()) into = report::read_source_file(path, option);
  };
  read(c.plan, "--plan", in.plan);
  read(c.sweep, "--sweep", in.sweep);
  std::string pareto = c.pareto;
  if (pareto.empty() && c.sweep.size() > 4 && c.sweep.compare(c.sweep.size() - 4, 4, ".csv") == 0) {
    const std::string beside = c.sweep.substr(0, c.sweep.size() - 4) + ".pareto.csv";
    std::error_code ec;
    if (std::filesystem::is_regular_file(beside, ec)) pareto = beside;
  }
  read(pareto, "--pareto", in.pareto);
  read(c.serve, "--serve", in.serve);
  read(c.requests, "--requests", in.requests);
  read(c.series, "--series", in.series);
  read(c.replay, "--replay", in.replay);
  const std::string html = report::render_report(in);
  if (c.out.empty()) std::fwrite(html.data(), 1, html.size(), stdout);
  else write_file_atomic(c.out, html);
  return 0;
}

}  // namespace kvsim
