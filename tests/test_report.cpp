// `kvsim report` (report/): for each kind of input, a page made from a small real run, read back
// without a browser: its data block equals the inputs, the warnings name every extrapolated and
// unmeasured phase, the tables carry the CLI's numbers, Plotly is inlined (nothing fetched), and bad
// inputs stop with a located error and leave no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/csv.hpp"
#include "core/error.hpp"
#include "report/page.hpp"
#include "report/report_data.hpp"
#include "report/plotly_js.hpp"
#include "test_util.hpp"

namespace kvsim {
namespace {

using json = nlohmann::json;
using test::read_text;
using test::run_kvsim;
using test::RunResult;

// A scratch folder of this test's own (ctest runs tests in parallel).
std::string scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = std::string(::testing::TempDir()) + "kvsim_report_" + info->name() + "/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void run_ok(const std::string& args) {
  const RunResult r = run_kvsim(args);
  ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.out;
}

// The page's data block, parsed.
json data_block(const std::string& html) {
  const std::string open = std::string("<script type=\"application/json\" id=\"") + report::kDataElementId + "\">";
  const size_t a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  if (a == std::string::npos) return json();
  const size_t b = html.find("</script>", a);
  return json::parse(html.substr(a + open.size(), b - a - open.size()));
}

// A CSV file as rows of fields (the header first).
std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(split_line(line));
  return rows;
}

// The page is self-contained: Plotly inlined whole, and nothing else on the page (its own markup, data
// and script, i.e. the page without Plotly) loads or links anything.
void expect_self_contained(const std::string& html) {
  const std::string plotly = read_text(report::plotly_js_path());
  ASSERT_GT(plotly.size(), 1000000u);
  const size_t at = html.find(plotly);
  ASSERT_NE(at, std::string::npos) << "Plotly is not inlined whole";
  const std::string own = html.substr(0, at) + html.substr(at + plotly.size());
  for (const char* s : {"src=", "<link", "http://", "https://", "@import"}) EXPECT_EQ(own.find(s), std::string::npos) << s;
  EXPECT_NE(own.find("Plotly.newPlot"), std::string::npos);
}

TEST(Report, PlanPageCarriesThePlanItsTableAndEveryWarning) {
  const std::string dir = scratch();
  run_ok("plan --context 16384,65536 --policy full --policy quest --policy ctkvr --format json -o " + dir + "plan.json");
  run_ok("report --plan " + dir + "plan.json -o " + dir + "plan.html");
  const std::string html = read_text(dir + "plan.html");
  expect_self_contained(html);
  const json plan = json::parse(read_text(dir + "plan.json"));
  const json d = data_block(html);
  EXPECT_EQ(d["schema"], "kvsim.report/1");
  EXPECT_EQ(d["plan"], plan);  // the very JSON the CLI wrote
  EXPECT_TRUE(d["serve"].is_null());
  // The calibration in force, by name, and one warning per result that has extrapolated or unmeasured
  // phases, naming exactly those phases.
  bool calibration = false;
  for (const json& w : d["warnings"])
    if (w["kind"] == "calibration" && w["text"].get<std::string>().find(plan["calibration"]["name"].get<std::string>()) !=
                                          std::string::npos)
      calibration = true;
  EXPECT_TRUE(calibration);
  int unmeasured_results = 0, modeled_results = 0;
  for (const json& r : plan["results"]) {
    std::vector<std::string> unmeasured;
    for (const json& u : r["unmeasured_phases"]) unmeasured.push_back(u["name"]);
    const std::vector<std::string> extrapolated = r["extrapolated_phases"];
    std::map<std::string, json> found;
    for (const json& w : d["warnings"])
      if (w["policy"] == r["policy"] && w["context_tokens"] == r["context_tokens"]) found[w["kind"]] = w["phases"];
    std::vector<std::string> modeled;
    for (const json& m : r["modeled_phases"]) modeled.push_back(m["name"]);
    if (!unmeasured.empty()) ++unmeasured_results;
    if (!modeled.empty()) ++modeled_results;
    EXPECT_EQ(found.count("modeled") ? found["modeled"] : json::array(), json(modeled)) << r["policy"];
    for (const std::string& p : modeled) EXPECT_NE(html.find(p + " ("), std::string::npos) << p;
    EXPECT_EQ(found.count("unmeasured") ? found["unmeasured"] : json::array(), json(unmeasured)) << r["policy"];
    EXPECT_EQ(found.count("extrapolated") ? found["extrapolated"] : json::array(), json(extrapolated)) << r["policy"];
    // Every phase named in a warning is on the page.
    for (const std::string& p : unmeasured) EXPECT_NE(html.find(p + " ("), std::string::npos) << p;
  }
  // Under the default calibration every GPU phase without a curve of its own is priced by a kernel
  // model (quest's and ctkvr's selections among them), none at a fallback constant.
  EXPECT_EQ(unmeasured_results, 0);
  EXPECT_GT(modeled_results, 0) << "quest and ctkvr run phases without a measured curve under the default calibration";
  // The table: each result's TPOT at the CLI's precision, and every chart's placeholder.
  for (const json& r : plan["results"]) {
    char tpot[32];
    std::snprintf(tpot, sizeof tpot, "<td>%.3f</td>", r["tpot_ms"].get<double>());
    EXPECT_NE(html.find(tpot), std::string::npos) << tpot;
  }
  // The lines the CLI prints under a policy's row are under it on the page, word for word.
  const RunResult table = run_kvsim("plan --context 16384,65536 --policy full --policy quest --policy ctkvr --detail");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  int lines = 0;
  std::istringstream in(table.out);
  for (std::string line; std::getline(in, line);)
    for (const char* start : {"    80% range", "    at full KV's batch", "    simulated step", "    index in HBM", "    roofline bound:"})
      if (line.rfind(start, 0) == 0) {
        ++lines;
        EXPECT_NE(html.find(std::string(">") + line.substr(4) + "<"), std::string::npos) << line;
      }
  EXPECT_GE(lines, 8);
  for (const char* id : {"chart-tpot", "chart-throughput", "chart-memory-hbm", "chart-memory-dram", "chart-phases"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
}

TEST(Report, SweepPageCarriesThePointsAndTheParetoFileBesideThem) {
  const std::string dir = scratch();
  test::write_temp("kvsim_report_sweep.yaml",
                   "scenario:\n  hardware: h100-sxm\n  model: llama-3.1-8b\n"
                   "  workload: {context_tokens: 32768, output_tokens: 1024, batch: max}\n"
                   "policies: [full, quest]\naxes:\n  - workload.context_tokens: [16384, 65536]\n"
                   "  - workload.batch: [1, 4]\n  - quest.budget_tokens: [256, 1024]\n");
  run_ok("sweep -q --threads 1 " + std::string(::testing::TempDir()) + "kvsim_report_sweep.yaml -o " + dir + "s.csv");
  run_ok("report --sweep " + dir + "s.csv -o " + dir + "s.html");  // s.pareto.csv is found beside it
  const std::string html = read_text(dir + "s.html");
  expect_self_contained(html);
  const json d = data_block(html);
  EXPECT_EQ(d["sources"]["pareto"], dir + "s.pareto.csv");
  for (const auto& [kind, file] : {std::pair<const char*, std::string>{"sweep", "s.csv"}, {"pareto", "s.pareto.csv"}}) {
    const auto rows = csv_rows(dir + file);
    ASSERT_EQ(d[kind]["columns"], json(rows[0])) << kind;
    ASSERT_EQ(d[kind]["rows"].size() + 1, rows.size()) << kind;
    for (size_t i = 1; i < rows.size(); ++i)
      for (size_t c = 0; c < rows[i].size(); ++c) {
        const json& cell = d[kind]["rows"][i - 1][c];
        if (rows[i][c].empty()) EXPECT_TRUE(cell.is_null());
        else if (cell.is_number()) EXPECT_EQ(cell.get<double>(), std::stod(rows[i][c])) << rows[0][c];
        else EXPECT_EQ(cell, rows[i][c]) << rows[0][c];
      }
  }
  // The Pareto table shows the knobs the hover names.
  EXPECT_NE(html.find("<th>quest.budget_tokens</th>"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-pareto\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-sweep-tpot\""), std::string::npos);
}

TEST(Report, ServePageCarriesThePercentilesEveryRequestAndTheQueueExactly) {
  const std::string dir = scratch();
  run_ok("serve --policy full --policy quest --requests 120 --format json -o " + dir + "s.json --requests-csv " + dir +
         "r.csv --series " + dir + "it.csv");
  run_ok("report --serve " + dir + "s.json --requests " + dir + "r.csv --series " + dir + "it.csv -o " + dir + "s.html");
  const std::string html = read_text(dir + "s.html");
  expect_self_contained(html);
  const json d = data_block(html);
  const json summary = json::parse(read_text(dir + "s.json"));
  EXPECT_EQ(d["serve"], summary);
  EXPECT_EQ(d["requests"]["rows"].size(), 240u);
  for (const json& p : summary["policies"]) {
    char p99[32];
    std::snprintf(p99, sizeof p99, "<td>%.1f</td>", p["ttft_s"]["p99"].get<double>() * 1e3);
    EXPECT_NE(html.find(p99), std::string::npos) << p["policy"] << " TTFT p99 " << p99;
    EXPECT_GT(p["slo"]["ttft_s"].get<double>(), 0);  // the SLO the CDF marks
  }
  // The series keeps only the iterations where the queue or the batch changes; stepping through them
  // gives every iteration's running and waiting counts.
  const auto rows = csv_rows(dir + "it.csv");
  const auto& cols = rows[0];
  auto col = [&](const char* c) { return size_t(std::find(cols.begin(), cols.end(), c) - cols.begin()); };
  const json& kept = d["series"]["rows"];
  EXPECT_EQ(d["series"]["iterations"], rows.size() - 1);
  EXPECT_LT(kept.size(), (rows.size() - 1) / 2);
  size_t k = 0;
  json current;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (k < kept.size() && kept[k][0] == r[col("policy")] && kept[k][1].get<double>() == std::stod(r[col("replica")]) &&
        kept[k][2].get<double>() == std::stod(r[col("start_s")]))
      current = kept[k++];
    ASSERT_FALSE(current.is_null());
    ASSERT_EQ(current[0], r[col("policy")]) << "row " << i;
    ASSERT_EQ(current[3].get<double>(), std::stod(r[col("running")])) << "row " << i;
    ASSERT_EQ(current[4].get<double>(), std::stod(r[col("waiting")])) << "row " << i;
  }
  EXPECT_EQ(k, kept.size());
  for (const char* id : {"chart-cdf-ttft", "chart-cdf-tpot", "chart-queue", "chart-batch"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
}

TEST(Report, ReplayPageCarriesTheReplayAndWarnsOfItsCarryToAnotherContext) {
  const std::string dir = scratch();
  run_ok("trace gen --preset tiny -o " + dir + "t.safetensors");
  run_ok("replay " + dir + "t.safetensors --policy full --policy quest --max-steps 4 --threads 1 --format json -o " + dir +
         "r.json");
  run_ok("report --replay " + dir + "r.json -o " + dir + "r.html");
  const std::string html = read_text(dir + "r.html");
  expect_self_contained(html);
  const json d = data_block(html);
  EXPECT_EQ(d["replay"], json::parse(read_text(dir + "r.json")));
  bool carried = false;
  for (const json& w : d["warnings"]) carried |= w["kind"] == "carried";
  EXPECT_TRUE(carried) << "the tiny trace's statistics are carried to the scenario's 128K context";
  EXPECT_NE(html.find("<td>quest</td>"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-replay\""), std::string::npos);
}

TEST(Report, ScenarioIsRunForItsPlanAndItsServingBlock) {
  const std::string dir = scratch();
  const std::string yaml = test::write_temp("kvsim_report_scenario.yaml",
                                            "hardware: h100-sxm\nmodel: llama-3.1-8b\n"
                                            "workload: {context_tokens: 8192, output_tokens: 256, batch: max}\n"
                                            "policies: [full, quest]\n"
                                            "serving:\n  rate: 2\n  requests: 40\n  seed: 1\n  prompt_tokens: 4096\n  output_tokens: 64\n"
                                            "  slo_ttft_s: 2\n  slo_tpot_s: 0.05\n");
  run_ok("report --scenario " + yaml + " -o " + dir + "sc.html");
  const json d = data_block(read_text(dir + "sc.html"));
  ASSERT_TRUE(d["plan"].is_object());
  EXPECT_EQ(d["plan"]["results"].size(), 2u);
  ASSERT_TRUE(d["serve"].is_object());
  EXPECT_EQ(d["serve"]["policies"].size(), 2u);
  EXPECT_EQ(d["requests"]["rows"].size(), 80u);
  EXPECT_TRUE(d["series"].is_object());
}

// Bad input: exit 2, one line naming the file, the field, the value and what is allowed, and the
// output file left as it was.
void expect_refused(const std::string& args, const std::string& out, const std::vector<std::string>& says,
                    const std::string& env = "") {
  std::ofstream(out) << "previous";
  const RunResult r = test::run_command(env + " '" + KVSIM_BINARY + "' " + args + " -o " + out);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
  for (const std::string& s : says) EXPECT_NE(r.out.find(s), std::string::npos) << "'" << s << "' in: " << r.out;
  EXPECT_EQ(read_text(out), "previous") << args;
}

TEST(Report, BadInputsAreRefusedWithALocatedErrorAndNoOutput) {
  const std::string dir = scratch();
  const std::string out = dir + "out.html";
  run_ok("plan --context 16384 --policy full --format json -o " + dir + "plan.json");
  json plan = json::parse(read_text(dir + "plan.json"));
  test::write_temp("kvsim_report_bad.csv", "policy,tpot_s\nfull,0.1\n");
  const std::string csv = std::string(::testing::TempDir()) + "kvsim_report_bad.csv";
  expect_refused("report --plan " + csv, out, {csv, "(json)", "not valid JSON"});
  json wrong = plan;
  wrong["schema"] = "kvsim.plan/9";
  std::ofstream(dir + "schema.json") << wrong.dump();
  expect_refused("report --plan " + dir + "schema.json", out, {dir + "schema.json", "schema", "kvsim.plan/9", "allowed: \"kvsim.plan/1\""});
  json bad_field = plan;
  bad_field["results"][0]["tpot_ms"] = "fast";
  std::ofstream(dir + "field.json") << bad_field.dump();
  expect_refused("report --plan " + dir + "field.json", out, {"results[0].tpot_ms", "\"fast\"", "allowed: a number or null"});
  expect_refused("report --serve " + dir + "plan.json", out, {"policies", "missing"});
  run_ok("serve --policy full --requests 20 --format json -o " + dir + "s.json");
  expect_refused("report --serve " + dir + "s.json --requests " + csv, out, {csv, "ttft_s", "missing column"});
  expect_refused("report --pareto " + csv, out, {"--pareto", "--sweep"});
  expect_refused("report", out, {"nothing to report", "allowed:"});
  expect_refused("report --plan " + dir + "missing.json", out, {"--plan", "missing.json", "cannot read"});
  expect_refused("report --scenario scenarios/default.yaml --plan " + dir + "plan.json", out, {"--scenario", "allowed"});
  expect_refused("report --plan " + dir + "plan.json", out, {"KVSIM_PLOTLY_JS", dir + "none.js", "allowed"},
                 "KVSIM_PLOTLY_JS=" + dir + "none.js");
}

TEST(Report, TextInAnInputCannotCloseTheDataBlock) {
  const std::string dir = scratch();
  run_ok("plan --context 16384 --policy full --format json -o " + dir + "plan.json");
  json plan = json::parse(read_text(dir + "plan.json"));
  const std::string hostile = "</script><script>alert(1)</script><!-- & \"quoted\"";
  plan["results"][0]["notes"].push_back(hostile);
  std::ofstream(dir + "hostile.json") << plan.dump();
  run_ok("report --plan " + dir + "hostile.json -o " + dir + "h.html");
  const std::string html = read_text(dir + "h.html");
  EXPECT_EQ(html.find("<script>alert(1)"), std::string::npos);
  const json d = data_block(html);
  EXPECT_EQ(d["plan"]["results"][0]["notes"].back(), hostile);
  bool noted = false;
  for (const json& w : d["warnings"]) noted |= w["kind"] == "note" && w["text"].get<std::string>().find(hostile) != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

// Every leaf of each JSON input replaced by a value of another type (and every array and object
// emptied): the page is made, or an InputError says why; nothing else escapes (a type error from the
// JSON library would be a crash of the CLI).
void swap_every_leaf(const json& input, report::ReportInputs& in, std::optional<report::Source> report::ReportInputs::*slot) {
  const json flat = input.flatten();
  int made = 0, refused = 0;
  for (auto it = flat.begin(); it != flat.end(); ++it)
    for (const json& other : {json("text"), json(nullptr), json(1.5), json::array(), json(true)}) {
      if (other == it.value()) continue;
      json changed = input;
      changed[json::json_pointer(it.key())] = other;
      (in.*slot) = report::Source{"mutated.json", changed.dump()};
      try {
        const json d = report::report_data(in);
        EXPECT_FALSE(report::render_page(d, "").empty());
        ++made;
      } catch (const InputError&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << it.key() << " = " << other.dump() << ": " << e.what();
        return;
      }
    }
  EXPECT_GT(made, 0);
  EXPECT_GT(refused, 0);
}

TEST(Report, EveryFieldOfTheWrongTypeIsAnInputError) {
  const std::string dir = scratch();
  run_ok("plan --context 16384 --policy full --policy quest --format json -o " + dir + "plan.json");
  run_ok("serve --policy full --requests 10 --format json -o " + dir + "s.json");
  run_ok("trace gen --preset tiny -o " + dir + "t.safetensors");
  run_ok("replay " + dir + "t.safetensors --policy full --max-steps 2 --threads 1 --format json -o " + dir + "r.json");
  report::ReportInputs in;
  json plan = json::parse(read_text(dir + "plan.json"));
  for (json& r : plan["results"]) r["phases"] = json::array({r["phases"][0]});  // one phase is enough, and faster
  swap_every_leaf(plan, in, &report::ReportInputs::plan);
  in = {};
  swap_every_leaf(json::parse(read_text(dir + "s.json")), in, &report::ReportInputs::serve);
  in = {};
  json replay = json::parse(read_text(dir + "r.json"));
  for (json& p : replay["policies"]) p.erase("per_layer");
  swap_every_leaf(replay, in, &report::ReportInputs::replay);
}

}  // namespace
}  // namespace kvsim
