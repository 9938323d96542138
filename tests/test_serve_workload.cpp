// Serving workloads: generated arrivals have the rate and burstiness asked for, are reproducible from
// the seed, lengths follow their distribution, request files in the public traces' formats read back
// to the right relative times, and every bad input names the file, the line and the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "serve/workload.hpp"
#include "test_util.hpp"

using namespace kvsim;
using namespace kvsim::serve;

namespace {
// The scenario file name the YAML pretends to come from: relative paths resolve against its directory.
std::string scenario_path() { return std::string(::testing::TempDir()) + "serve_workload.yaml"; }

WorkloadSpec spec_of(const std::string& yaml) {
  YamlMap m(load_yaml_string(yaml, scenario_path()), scenario_path(), "serving");
  WorkloadSpec w = read_workload(m);
  m.finish();
  return w;
}

std::vector<Request> requests_of(const std::string& yaml, int64_t max_context = 1 << 20) {
  return make_requests(spec_of(yaml), max_context);
}

// The error message of reading (and generating) a workload, or "" when there was none.
std::string error_of(const std::string& yaml, int64_t max_context = 1 << 20) {
  try {
    requests_of(yaml, max_context);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

std::string file_error(const std::string& path, int64_t max_context = 1 << 20) {
  try {
    load_request_file(path, max_context);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

std::vector<double> gaps(const std::vector<Request>& rs) {
  std::vector<double> g;
  double prev = 0;
  for (const Request& r : rs) g.push_back(r.arrival_s - prev), prev = r.arrival_s;
  return g;
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
double cv(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1)) / m;
}
std::vector<double> lengths(const std::vector<Request>& rs, bool prompt) {
  std::vector<double> v;
  for (const Request& r : rs) v.push_back(double(prompt ? r.prompt_tokens : r.output_tokens));
  return v;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)
}  // namespace

TEST(ServeWorkload, PoissonArrivalsHaveTheRate) {
  const auto rs = requests_of("arrival: poisson\nrate: 4\nrequests: 100000\n");
  ASSERT_EQ(rs.size(), 100000u);
  const auto g = gaps(rs);
  EXPECT_NEAR(mean(g), 0.25, 0.25 * 0.03);
  EXPECT_NEAR(cv(g), 1.0, 0.05);  // exponential gaps
  EXPECT_GT(rs[0].arrival_s, 0);  // the first arrival is one gap after the start
  for (size_t i = 0; i < rs.size(); ++i) ASSERT_EQ(rs[i].id, int64_t(i));
  EXPECT_TRUE(std::is_sorted(rs.begin(), rs.end(), [](auto& a, auto& b) { return a.arrival_s < b.arrival_s; }));
}

TEST(ServeWorkload, GammaArrivalsHaveTheCv) {
  const auto bursty = gaps(requests_of("arrival: gamma\nrate: 3\ncv: 2\nrequests: 200000\n"));
  EXPECT_NEAR(cv(bursty), 2.0, 0.2);
  EXPECT_NEAR(mean(bursty), 1.0 / 3, (1.0 / 3) * 0.03);
  const auto smooth = gaps(requests_of("arrival: gamma\nrate: 3\ncv: 0.5\nrequests: 100000\n"));
  EXPECT_NEAR(cv(smooth), 0.5, 0.05);
  EXPECT_NEAR(mean(smooth), 1.0 / 3, (1.0 / 3) * 0.03);
}

TEST(ServeWorkload, TheSeedDecidesEverything) {
  const std::string base = "arrival: gamma\ncv: 1.5\nrate: 2\nrequests: 500\n"
                           "prompt_tokens: {dist: lognormal, median: 2000, sigma: 1}\n"
                           "output_tokens: {dist: uniform, min: 1, max: 500}\n";
  auto same = [](const std::vector<Request>& a, const std::vector<Request>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].id != b[i].id || a[i].arrival_s != b[i].arrival_s || a[i].prompt_tokens != b[i].prompt_tokens ||
          a[i].output_tokens != b[i].output_tokens)
        return false;
    return true;
  };
  const auto a = requests_of(base + "seed: 7\n");
  EXPECT_TRUE(same(a, requests_of(base + "seed: 7\n")));
  const auto b = requests_of(base + "seed: 8\n");
  EXPECT_FALSE(same(a, b));
  EXPECT_NE(a[0].arrival_s, b[0].arrival_s);
  EXPECT_NE(lengths(a, true), lengths(b, true));
  EXPECT_NE(lengths(a, false), lengths(b, false));
  // The streams are separate: changing the output distribution keeps the arrivals and the prompts.
  const auto c = requests_of("arrival: gamma\ncv: 1.5\nrate: 2\nrequests: 500\nseed: 7\n"
                             "prompt_tokens: {dist: lognormal, median: 2000, sigma: 1}\noutput_tokens: 64\n");
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].arrival_s, c[i].arrival_s);
    ASSERT_EQ(a[i].prompt_tokens, c[i].prompt_tokens);
    ASSERT_EQ(c[i].output_tokens, 64);
  }
}

TEST(ServeWorkload, RequestsOrDurationBoundTheRun) {
  EXPECT_EQ(requests_of("rate: 10\nrequests: 37\n").size(), 37u);
  const auto rs = requests_of("rate: 5\nduration_s: 100\n");
  ASSERT_FALSE(rs.empty());
  for (const Request& r : rs) EXPECT_LT(r.arrival_s, 100);
  EXPECT_NEAR(double(rs.size()), 500, 75);  // Poisson count: sd ~22
  EXPECT_GT(rs.back().arrival_s, 95);       // not cut early
}

TEST(ServeWorkload, Defaults) {
  const WorkloadSpec w = spec_of("requests: 3\n");
  EXPECT_EQ(w.arrivals.kind, ArrivalSpec::Kind::poisson);
  EXPECT_EQ(w.arrivals.rate, 1);
  EXPECT_EQ(w.seed, 1u);
  EXPECT_EQ(w.prompt.describe(), "fixed 8192");
  EXPECT_EQ(w.output.describe(), "fixed 256");
  for (const Request& r : make_requests(w, 100000)) {
    EXPECT_EQ(r.prompt_tokens, 8192);
    EXPECT_EQ(r.output_tokens, 256);
  }
}

TEST(ServeWorkload, LengthDistributions) {
  const auto fixed = requests_of("requests: 100\nprompt_tokens: {dist: fixed, value: 1234}\noutput_tokens: 77\n");
  for (const Request& r : fixed) EXPECT_TRUE(r.prompt_tokens == 1234 && r.output_tokens == 77);

  const auto uni = lengths(requests_of("requests: 20000\nprompt_tokens: {dist: uniform, min: 100, max: 300}\n"), true);
  EXPECT_EQ(*std::min_element(uni.begin(), uni.end()), 100);
  EXPECT_EQ(*std::max_element(uni.begin(), uni.end()), 300);
  EXPECT_NEAR(mean(uni), 200, 2);

  const auto logn = lengths(requests_of("requests: 20000\noutput_tokens: {dist: lognormal, median: 1000, sigma: 1.5, "
                                        "min: 50, max: 20000}\n"), false);
  EXPECT_NEAR(median(logn), 1000, 30);
  EXPECT_EQ(*std::min_element(logn.begin(), logn.end()), 50);     // 2% of draws fall below 50 unclamped
  EXPECT_EQ(*std::max_element(logn.begin(), logn.end()), 20000);  // and 2% above 20000
  // Without a max the tail is free; min defaults to 1.
  const auto tail =
      lengths(requests_of("requests: 20000\noutput_tokens: {dist: lognormal, median: 1000, sigma: 1.5}\n"), false);
  EXPECT_GT(*std::max_element(tail.begin(), tail.end()), 20000);
  EXPECT_GE(*std::min_element(tail.begin(), tail.end()), 1);

  test::write_temp("serve_lengths.txt", "# prompt lengths\n\n300\n5000  # a long one\n42\n");
  const auto emp = lengths(requests_of("requests: 3000\nprompt_tokens: {dist: empirical, file: serve_lengths.txt}\n"),
                           true);
  EXPECT_EQ(std::set<double>(emp.begin(), emp.end()), (std::set<double>{42, 300, 5000}));
}

TEST(ServeWorkload, Describe) {
  EXPECT_EQ(spec_of("requests: 1\nprompt_tokens: {dist: lognormal, median: 2000, sigma: 0.8}\n").prompt.describe(),
            "lognormal median 2000 sigma 0.8");
  EXPECT_EQ(spec_of("requests: 1\nprompt_tokens: {dist: uniform, min: 5, max: 9}\n").prompt.describe(),
            "uniform 5 .. 9");
  test::write_temp("serve_lengths2.txt", "1\n2\n");
  EXPECT_EQ(spec_of("requests: 1\noutput_tokens: {dist: empirical, file: serve_lengths2.txt}\n").output.describe(),
            "empirical 2 values");
}

TEST(ServeWorkload, AzureCsvWithDateTimes) {
  const std::string p = test::write_temp("serve_azure.csv",
                                         "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                                         "2023-11-16 18:15:46.6805900,4808,10\r\n"
                                         "2023-11-16 18:15:48.1805900,3180,8\r\n"
                                         "2023-11-16 18:15:48.1805900,100,1\r\n"  // equal times are fine
                                         "2023-11-17 00:00:00.0000000,5,5\r\n");
  const auto rs = load_request_file(p, 10000);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].arrival_s, 0);
  EXPECT_NEAR(rs[1].arrival_s, 1.5, 1e-9);
  EXPECT_NEAR(rs[2].arrival_s, 1.5, 1e-9);
  EXPECT_NEAR(rs[3].arrival_s, 5 * 3600 + 44 * 60 + 13.3194100, 1e-6);
  EXPECT_EQ(rs[0].prompt_tokens, 4808);
  EXPECT_EQ(rs[0].output_tokens, 10);
  EXPECT_EQ(rs[3].id, 3);
}

TEST(ServeWorkload, DateTimesCrossMonthsYearsAndLeapDays) {
  const std::string p = test::write_temp("serve_dates.csv",
                                         "timestamp,prompt_tokens,output_tokens\n"
                                         "2023-12-31 23:59:59.5,1,1\n"
                                         "2024-01-01 00:00:01,1,1\n"      // 1.5 s later, across the year
                                         "2024-02-29 00:00:01,1,1\n"      // leap day: 59 days after Jan 1
                                         "2024-03-01T00:00:01Z,1,1\n");   // ISO form
  const auto rs = load_request_file(p, 100);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_NEAR(rs[1].arrival_s, 1.5, 1e-9);
  EXPECT_NEAR(rs[2].arrival_s, 1.5 + 59 * 86400.0, 1e-9);
  EXPECT_NEAR(rs[3].arrival_s, 1.5 + 60 * 86400.0, 1e-9);
}

TEST(ServeWorkload, MooncakeJsonlInMilliseconds) {
  const std::string p = test::write_temp("serve_mooncake.jsonl",
                                         "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, "
                                         "\"hash_ids\": [46, 47, 48]}\n"
                                         "\n"
                                         "{\"timestamp\": 28982, \"input_length\": 6472, \"output_length\": 26, "
                                         "\"hash_ids\": [46, 49]}\n");
  const auto rs = load_request_file(p, 10000);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].arrival_s, 0);
  EXPECT_NEAR(rs[1].arrival_s, 1.5, 1e-12);
  EXPECT_EQ(rs[1].prompt_tokens, 6472);
  EXPECT_EQ(rs[1].output_tokens, 26);
  // JSON lines are recognized by their '{' whatever the extension; arrival_s is seconds.
  const std::string q = test::write_temp("serve_generic.txt",
                                         "{\"arrival_s\": 10, \"prompt_tokens\": \"5\", \"output_tokens\": 6}\n"
                                         "{\"arrival_s\": 12.25, \"prompt_tokens\": 7, \"output_tokens\": 8.0}\n");
  const auto qs = load_request_file(q, 100);
  ASSERT_EQ(qs.size(), 2u);
  EXPECT_EQ(qs[1].arrival_s, 2.25);
  EXPECT_EQ(qs[0].prompt_tokens, 5);
  EXPECT_EQ(qs[1].output_tokens, 8);
}

TEST(ServeWorkload, GenericCsvAnyOrderAnyCase) {
  const std::string p = test::write_temp("serve_generic.csv",
                                         "\"Output_Tokens\", note ,ARRIVAL_S,prompt_tokens\n"
                                         "20,\"hello, world\",100.5,300\n"
                                         "30,x,101.0,400\n");
  const auto rs = load_request_file(p, 1000);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].arrival_s, 0);
  EXPECT_EQ(rs[1].arrival_s, 0.5);
  EXPECT_EQ(rs[0].prompt_tokens, 300);
  EXPECT_EQ(rs[0].output_tokens, 20);
  EXPECT_EQ(rs[1].output_tokens, 30);
}

TEST(ServeWorkload, TraceArrivalsScaleAndCut) {
  test::write_temp("serve_trace.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,20,2\n2,30,3\n3,40,4\n");
  const auto all = requests_of("arrival: trace\ntrace: serve_trace.csv\n");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[3].arrival_s, 3);
  const auto fast = requests_of("arrival: trace\ntrace: serve_trace.csv\ntime_scale: 0.5\n");
  EXPECT_EQ(fast[3].arrival_s, 1.5);
  EXPECT_EQ(requests_of("arrival: trace\ntrace: serve_trace.csv\nrequests: 2\n").size(), 2u);
  const auto cut = requests_of("arrival: trace\ntrace: serve_trace.csv\nduration_s: 2\n");
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[1].prompt_tokens, 20);
  EXPECT_EQ(requests_of("arrival: trace\ntrace: serve_trace.csv\ntime_scale: 0.5\nduration_s: 2\n").size(), 4u);
}

TEST(ServeWorkload, RequestFileErrorsNameFileLineAndField) {
  auto check = [](const std::string& name, const std::string& text, const std::string& where,
                  const std::string& what, int64_t max_context = 1000) {
    const std::string p = test::write_temp(name, text);
    const std::string e = file_error(p, max_context);
    EXPECT_HAS(e, p + where);
    EXPECT_HAS(e, what);
  };
  check("serve_e1.csv", "arrival_s,prompt_tokens,output_tokens\n5,1,1\n4,1,1\n", ":3: arrival_s:", "sorted");
  check("serve_e2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,10,0\n", ":2: GeneratedTokens:", "value 0");
  check("serve_e3.csv", "arrival_s,prompt_tokens,output_tokens\n1,-5,1\n", ":2: prompt_tokens:", "-5 is negative");
  check("serve_e4.csv", "arrival_s,prompt_tokens,output_tokens\n1,10,1\n2,990,20\n", ":3: prompt_tokens:",
        "<= 1000");
  check("serve_e5.csv", "arrival_s,tokens,output_tokens\n1,10,1\n", ":1: prompt_tokens:", "ContextTokens");
  check("serve_e6.csv", "arrival_s,prompt_tokens,output_tokens\n1,ten,1\n", ":2: prompt_tokens:", "'ten'");
  check("serve_e7.csv", "arrival_s,prompt_tokens,output_tokens\n1,10.5,1\n", ":2: prompt_tokens:", "whole number");
  check("serve_e8.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-01 00:00:00,1,1\n", ":2: TIMESTAMP:",
        "2023-13-01");
  check("serve_e9.csv", "arrival_s,prompt_tokens,output_tokens\n1,10\n", ":2: output_tokens:", "2 fields");
  check("serve_e10.csv", "arrival_s,prompt_tokens,output_tokens\n", ":1:", "no requests");
  check("serve_e11.csv", "", "", "empty");
  check("serve_e12.jsonl", "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 5}\n{\"timestamp\": 2,\n",
        ":2:", "not valid JSON");
  check("serve_e13.jsonl", "{\"timestamp\": 1, \"input_length\": 5}\n", ":1: output_tokens:", "GeneratedTokens");
  check("serve_e14.jsonl", "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": null}\n",
        ":1: output_length:", "null");
  check("serve_e15.jsonl", "[1, 2, 3]\n", ":1:", "JSON object");
  check("serve_e16.csv", "timestamp,prompt_tokens,output_tokens\n2023-11-16 18:15:46,1,1\n5,1,1\n",
        ":3: timestamp:", "one format");
  EXPECT_HAS(file_error(std::string(::testing::TempDir()) + "serve_no_such.csv"), "cannot open");
}

TEST(ServeWorkload, YamlErrorsNameTheKey) {
  const std::string f = scenario_path();
  EXPECT_HAS(error_of("rate: 1\nrequests: 5\nduration_s: 10\n"), f + ":3: serving.duration_s: give exactly one");
  EXPECT_HAS(error_of("rate: 1\n"), "serving.requests: missing");
  EXPECT_HAS(error_of("rate: 1\n"), "duration_s");
  EXPECT_HAS(error_of("requests: 5\nprompt_tokens: {dist: normal, value: 5}\n"),
             f + ":2: serving.prompt_tokens.dist: value 'normal' is not allowed");
  EXPECT_HAS(error_of("requests: 5\nprompt_tokens:\n  dist: lognormal\n  median: 5\n  sigam: 1\n"),
             f + ":5: serving.prompt_tokens.sigam: unknown key (did you mean 'sigma'?)");
  EXPECT_HAS(error_of("requests: 5\noutput_tokens: {dist: uniform, min: 10, max: 5}\n"), "serving.output_tokens.max");
  EXPECT_HAS(error_of("requests: 5\noutput_tokens: {min: 10}\n"), "serving.output_tokens.dist: missing");
  EXPECT_HAS(error_of("requests: 5\noutput_tokens: [1, 2]\n"), f + ":2: serving.output_tokens: expected");
  EXPECT_HAS(error_of("requests: 5\noutput_tokens: 0\n"), "serving.output_tokens: value 0 is out of range");
  EXPECT_HAS(error_of("arrival: poison\nrequests: 5\n"), "did you mean 'poisson'");
  EXPECT_HAS(error_of("rate: -2\nrequests: 5\n"), "serving.rate: value -2 is out of range");
  EXPECT_HAS(error_of("arrival: gamma\ncv: 0\nrequests: 5\n"), "serving.cv");
  EXPECT_HAS(error_of("cv: 2\nrequests: 5\n"), "serving.cv: cv applies to arrival: gamma only");
  EXPECT_HAS(error_of("arrival: trace\n"), "serving.trace: missing");
  EXPECT_HAS(error_of("arrival: trace\ntrace: serve_missing.csv\n"), "serving.trace: file");
  test::write_temp("serve_trace2.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,1\n");
  EXPECT_HAS(error_of("arrival: trace\ntrace: serve_trace2.csv\nrate: 3\n"), "serving.rate: rate does not apply");
  EXPECT_HAS(error_of("time_scale: 2\nrequests: 5\n"), "serving.time_scale");
  test::write_temp("serve_bad_lengths.txt", "10\n# fine\n\nlots\n");
  const std::string e = error_of("requests: 5\nprompt_tokens: {dist: empirical, file: serve_bad_lengths.txt}\n");
  EXPECT_HAS(e, "serve_bad_lengths.txt:4: value: 'lots' is not an integer");
}

TEST(ServeWorkload, GeneratedRequestsMustFitTheContext) {
  EXPECT_HAS(error_of("requests: 5\nprompt_tokens: 8000\noutput_tokens: 100\n", 8000),
             "serving.prompt_tokens: request 0 has 8000 prompt + 100 output tokens");
  EXPECT_HAS(error_of("requests: 5\nprompt_tokens: 7000\noutput_tokens: 2000\n", 8000),
             "serving.output_tokens: request 0 has 7000 prompt + 2000 output tokens = 9000");
  EXPECT_HAS(error_of("requests: 5\nprompt_tokens: 7000\noutput_tokens: 2000\n", 8000), "<= 8000");
  EXPECT_EQ(error_of("requests: 5\nprompt_tokens: 7000\noutput_tokens: 1000\n", 8000), "");
  EXPECT_HAS(error_of("rate: 1e6\nduration_s: 1e6\n"), "serving.duration_s");
  EXPECT_HAS(error_of("rate: 0.001\nduration_s: 1\n"), "no request arrives");
}
