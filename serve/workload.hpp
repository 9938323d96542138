// The requests a serving simulation replays: when each arrives and how many prompt and output tokens it
// has. Either generated (arrivals as a Poisson or gamma process, lengths from a distribution) or read
// from a request file (CSV or JSONL, with the column names of public production traces). The format is
// documented in docs/serving.md ("Workload").
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/yaml_reader.hpp"

namespace kvsim::serve {

struct Request {
  int64_t id = 0;          // 0-based, in arrival order
  double arrival_s = 0;    // seconds from the start of the run
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

// The workload's median request: the medians of its prompt and output lengths (type-7 quantiles,
// rounded; the output at least 1). What capacity's budget search and the step-time range read
// (serve/capacity.hpp, serve/step_range.hpp). Zeros for no requests.
struct MedianRequest {
  int64_t prompt = 0, output = 0;
};
MedianRequest median_request(const std::vector<Request>& requests);

// A token-length distribution. `fixed`: value. `uniform`: integers in [min, max]. `lognormal`: the
// exp of a normal with the given median's log and sigma, rounded, clamped to [min, max]. `empirical`:
// values drawn uniformly from a file's list (one integer per line, '#' comments).
struct LengthDist {
  enum class Kind { fixed, uniform, lognormal, empirical };
  Kind kind = Kind::fixed;
  int64_t value = 0;
  int64_t min = 1, max = 0;     // uniform bounds; lognormal clamp (max 0 = no upper clamp)
  double median = 0, sigma = 0;  // lognormal
  std::vector<int64_t> values;   // empirical
  int64_t sample(std::mt19937_64& rng) const;
  std::string describe() const;  // e.g. "fixed 8192", "lognormal median 2000 sigma 0.8"
};

struct ArrivalSpec {
  enum class Kind { poisson, gamma, trace };
  Kind kind = Kind::poisson;
  double rate = 1;  // requests per second (poisson, gamma)
  double cv = 1;    // gamma: coefficient of variation of the inter-arrival times (1 = Poisson)
  std::string file; // trace: a request file (CSV or JSONL)
};

struct WorkloadSpec {
  ArrivalSpec arrivals;
  LengthDist prompt, output;   // ignored for a trace (the file has the lengths)
  int64_t requests = 0;        // stop after this many requests (0: use duration_s)
  double duration_s = 0;       // or arrivals within this many seconds (0: use requests)
  uint64_t seed = 1;
  double time_scale = 1;       // trace: multiply the file's inter-arrival times (e.g. 0.5 = twice the rate)
  std::string file;            // where the spec came from, for errors
};

// Reads the workload keys of a scenario's `serving:` block through `m` (arrival, rate, cv, trace,
// time_scale, requests, duration_s, seed, prompt_tokens, output_tokens). The caller reads the engine's
// keys from the same map and calls m.finish(). Relative trace / empirical paths are resolved against
// the scenario file's directory.
WorkloadSpec read_workload(YamlMap& m);

// The requests of `w`, in arrival order, ids 0..n-1. Byte-identical for the same spec and seed.
// `max_context`: the model's context window; a request whose prompt + output exceeds it is an
// InputError (file, line, field). Exactly one of requests / duration_s bounds a generated workload; a
// trace is read whole, then cut by them when given.
std::vector<Request> make_requests(const WorkloadSpec& w, int64_t max_context);

// A request file. CSV with a header (columns, case-insensitive, any order; extra columns ignored):
// arrival time from one of `arrival_s`, `timestamp`, `TIMESTAMP`; prompt tokens from `prompt_tokens`,
// `ContextTokens`, `input_length`; output tokens from `output_tokens`, `GeneratedTokens`,
// `output_length`. JSONL: one object per line with the same names. Timestamps are seconds, or
// milliseconds when the column is Mooncake's `timestamp` in a .jsonl file, or a date-time string
// ("2023-11-16 18:15:46.6805900", Azure's format) -- times are made relative to the first request.
// Errors name the file, the line and the field: unsorted times, negative or zero lengths, prompts
// beyond max_context, missing columns, unparsable values.
std::vector<Request> load_request_file(const std::string& path, int64_t max_context);

}  // namespace kvsim::serve
