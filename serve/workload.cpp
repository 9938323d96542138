#include "serve/workload.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/quantile.hpp"
#include "core/csv.hpp"

namespace kvsim::serve {

namespace fs = std::filesystem;

namespace {

// A generated workload is held in memory whole; this bounds what a typo in rate or duration_s can ask
// for (32 bytes a request) to an error instead of an out-of-memory kill.
constexpr int64_t kMaxGenerated = 10'000'000;

// --- Random draws, written out so the same seed gives the same requests with every standard library
// (the std:: distributions are implementation-defined; only the engines are specified).

// Uniform in [0, 1) from the top 53 bits: every value is an exact double.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Uniform in (0, 1]: safe to take the log of.
double uniform_open0(std::mt19937_64& rng) { return 1.0 - uniform01(rng); }

double exponential(std::mt19937_64& rng, double rate) { return -std::log(uniform_open0(rng)) / rate; }

// Box-Muller, using one of the pair: keeping the other would make a draw depend on the call's parity.
double standard_normal(std::mt19937_64& rng) {
  const double r = std::sqrt(-2.0 * std::log(uniform_open0(rng)));
  return r * std::cos(2.0 * std::numbers::pi * uniform01(rng));
}

// Gamma(shape k, scale 1) by Marsaglia and Tsang's rejection method, which needs k >= 1: below that it
// samples Gamma(k + 1) and multiplies by U^(1/k).
double standard_gamma(std::mt19937_64& rng, double k) {
  if (k < 1) {
    const double g = standard_gamma(rng, k + 1);
    return g * std::pow(uniform_open0(rng), 1.0 / k);
  }
  const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double z = standard_normal(rng);
    const double t = 1.0 + c * z;
    if (t <= 0) continue;
    const double v = t * t * t;
    if (std::log(uniform_open0(rng)) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v;
  }
}

// --- YAML

std::string resolve_path(const std::string& path, const std::string& scenario_file) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(scenario_file).parent_path() / path).string();
}

// Keys that have no effect for the chosen arrival process are errors rather than silently ignored: a
// user who set `rate` on a trace expected it to change something.
void reject(YamlMap& m, const std::string& key, const std::string& why) {
  if (m.has(key)) {
    m.node(key);
    m.fail(key, why);
  }
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// An empirical length file: one integer >= 1 a line; '#' starts a comment; blank lines are skipped.
std::vector<int64_t> load_length_list(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, 0, "", "cannot open file (does it exist and is it readable?)");
  std::vector<int64_t> values;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    const std::string t = trim(line.substr(0, line.find('#')));
    if (t.empty()) continue;
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size())
      throw_input_error(path, no, "value", "'" + t + "' is not an integer; allowed: one integer >= 1 a line");
    if (v < 1) throw_input_error(path, no, "value", std::to_string(v) + " is out of range; allowed: an integer >= 1");
    values.push_back(v);
  }
  if (values.empty()) throw_input_error(path, 0, "", "no values: the file needs at least one integer >= 1");
  return values;
}

LengthDist read_length(YamlMap& m, const std::string& key, int64_t fallback) {
  LengthDist d;
  d.value = fallback;
  const YAML::Node n = m.node(key);
  if (!n) return d;
  if (n.IsScalar()) {
    d.value = m.integer(key, Range::at_least(1));
    return d;
  }
  if (!n.IsMap())
    m.fail(key, "expected a token count or a mapping {dist: fixed | uniform | lognormal | empirical, ...}");
  YamlMap s = m.map(key);
  const std::vector<std::string> kinds = {"fixed", "uniform", "lognormal", "empirical"};
  if (!s.has("dist")) s.fail("dist", "missing; allowed: " + join(kinds));
  const std::string kind = s.choice("dist", kinds);
  static const std::vector<std::vector<std::string>> kKeys = {
      {"value"}, {"min", "max"}, {"median", "sigma", "min", "max"}, {"file"}};
  const size_t k = size_t(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
  // Unknown keys first, so a misspelled required key reads "did you mean", not "missing".
  for (const std::string& x : kKeys[k]) s.node(x);
  s.finish();
  d.kind = LengthDist::Kind(k);
  switch (d.kind) {
    case LengthDist::Kind::fixed:
      d.value = s.integer("value", Range::at_least(1));
      break;
    case LengthDist::Kind::uniform:
      d.min = s.integer("min", Range::at_least(1));
      d.max = s.integer("max", Range::at_least(double(d.min)));
      break;
    case LengthDist::Kind::lognormal:
      d.median = s.number("median", Range::positive());
      d.sigma = s.number("sigma", Range::between(0, 10));
      d.min = s.integer("min", Range::at_least(1), 1);
      d.max = s.integer("max", Range::at_least(0), 0);
      if (d.max != 0 && d.max < d.min)
        s.fail("max", "value " + std::to_string(d.max) + " is below min " + std::to_string(d.min) +
                          "; allowed: 0 (no upper clamp) or an integer >= min");
      break;
    case LengthDist::Kind::empirical: {
      const std::string file = resolve_path(s.string("file"), m.file());
      if (!fs::exists(file))
        s.fail("file", "file '" + file + "' not found (a relative path is resolved against the scenario's directory)");
      d.values = load_length_list(file);
      break;
    }
  }
  return d;
}

// --- Request files

// The columns a request file may name, lowercase, in order of preference; the first is the display name.
enum Role { kTime, kPrompt, kOutput };
const std::array<std::vector<std::string>, 3> kColumnNames = {{
    {"arrival_s", "timestamp"},
    {"prompt_tokens", "contexttokens", "input_length"},
    {"output_tokens", "generatedtokens", "output_length"},
}};
const std::array<std::string, 3> kAccepted = {
    "arrival_s, timestamp (Azure's TIMESTAMP; Mooncake's timestamp in milliseconds)",
    "prompt_tokens, ContextTokens (Azure), input_length (Mooncake)",
    "output_tokens, GeneratedTokens (Azure), output_length (Mooncake)"};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<double> parse_double(const std::string& t) {
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A point in time, kept as whole seconds plus a fraction so that an epoch date-time (1.7e9 s) keeps its
// sub-microsecond digits when made relative to the first request.
struct Stamp {
  int64_t whole = 0;
  double frac = 0;
  bool date_time = false;
};

// Days from 0001-01-01 (proleptic Gregorian) to the given date; only differences are used.
int64_t day_number(int64_t y, int m, int d) {
  static const int kBefore[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int64_t p = y - 1;
  return 365 * p + p / 4 - p / 100 + p / 400 + kBefore[m - 1] + (leap && m > 2 ? 1 : 0) + d - 1;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" (a 'T' for the space and a trailing 'Z' are accepted too).
std::optional<Stamp> parse_date_time(const std::string& t) {
  auto digits = [&](size_t at, size_t n, int& out) {
    if (at + n > t.size()) return false;
    out = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (t[i] < '0' || t[i] > '9') return false;
      out = out * 10 + (t[i] - '0');
    }
    return true;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(0, 4, y) || t.size() < 19 || t[4] != '-' || !digits(5, 2, mo) || t[7] != '-' || !digits(8, 2, d) ||
      (t[10] != ' ' && t[10] != 'T') || !digits(11, 2, h) || t[13] != ':' || !digits(14, 2, mi) || t[16] != ':' ||
      !digits(17, 2, s))
    return std::nullopt;
  static const int kDays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 ||
      mi > 59 || s > 59)
    return std::nullopt;
  size_t at = 19;
  Stamp st;
  st.date_time = true;
  if (at < t.size() && t[at] == '.') {
    const size_t b = at + 1;
    at = b;
    while (at < t.size() && t[at] >= '0' && t[at] <= '9') ++at;
    if (at == b) return std::nullopt;
    const std::string f = "0." + t.substr(b, at - b);
    st.frac = *parse_double(f);
  }
  if (at < t.size() && t[at] == 'Z') ++at;
  if (at != t.size()) return std::nullopt;
  st.whole = day_number(y, mo, d) * 86400 + int64_t(h) * 3600 + mi * 60 + s;
  return st;
}

// Reads the rows of one request file, in either format, and checks each as it comes.
class RequestReader {
 public:
  RequestReader(std::string path, int64_t max_context) : path_(std::move(path)), max_context_(max_context) {}

  // texts/names: the cell and the column (as the file spells it) for each role.
  void add(int line, const std::array<std::string, 3>& texts, const std::array<std::string, 3>& names,
           bool milliseconds) {
    Request r;
    r.id = int64_t(out_.size());
    const Stamp st = stamp(line, texts[kTime], names[kTime], milliseconds);
    if (out_.empty()) first_ = st;
    if (st.date_time != first_.date_time)
      fail(line, names[kTime],
           "value '" + texts[kTime] + "' is a " + (st.date_time ? "date-time" : "number") +
               " but the first request's time is a " + (first_.date_time ? "date-time" : "number") +
               "; use one format for the whole column");
    r.arrival_s = double(st.whole - first_.whole) + (st.frac - first_.frac);
    if (!out_.empty() && r.arrival_s < out_.back().arrival_s)
      fail(line, names[kTime],
           "value '" + texts[kTime] + "' is earlier than the previous request's '" + prev_text_ + "' (line " +
               std::to_string(prev_line_) + "); requests must be sorted by arrival time (equal times are allowed)");
    r.prompt_tokens = length(line, texts[kPrompt], names[kPrompt]);
    r.output_tokens = length(line, texts[kOutput], names[kOutput]);
    if (r.prompt_tokens + r.output_tokens > max_context_)
      fail(line, names[kPrompt],
           std::to_string(r.prompt_tokens) + " prompt + " + std::to_string(r.output_tokens) + " output tokens = " +
               std::to_string(r.prompt_tokens + r.output_tokens) + " exceed the model's context window; allowed: " +
               "prompt + output <= " + std::to_string(max_context_));
    out_.push_back(r);
    prev_text_ = texts[kTime];
    prev_line_ = line;
  }

  [[noreturn]] void fail(int line, const std::string& field, const std::string& message) const {
    throw_input_error(path_, line, field, message);
  }

  std::vector<Request> take() { return std::move(out_); }
  bool empty() const { return out_.empty(); }

 private:
  std::string path_;
  int64_t max_context_;
  std::vector<Request> out_;
  Stamp first_;
  std::string prev_text_;  // the previous request's time as written, for the unsorted-times error
  int prev_line_ = 0;

  Stamp stamp(int line, const std::string& t, const std::string& name, bool milliseconds) const {
    if (const auto v = parse_double(t)) {
      Stamp st;
      st.frac = milliseconds ? *v / 1000 : *v;
      return st;
    }
    if (const auto st = parse_date_time(t)) return *st;
    fail(line, name,
         "value '" + t + "' is not a time; allowed: a number of " + (milliseconds ? "milliseconds" : "seconds") +
             " or a date-time 'YYYY-MM-DD HH:MM:SS[.fraction]'");
  }

  int64_t length(int line, const std::string& t, const std::string& name) const {
    const auto v = parse_double(t);
    if (!v) fail(line, name, "value '" + t + "' is not a number; allowed: a token count >= 1");
    if (*v != std::floor(*v)) fail(line, name, "value " + t + " is not a whole number; allowed: a token count >= 1");
    if (*v < 0) fail(line, name, "value " + t + " is negative; allowed: a token count >= 1");
    if (*v == 0)
      fail(line, name,
           "value 0: a request with no tokens cannot be simulated (remove such rows, e.g. failed requests a "
           "trace records with 0 generated tokens); allowed: a token count >= 1");
    if (*v > 9e15) fail(line, name, "value " + t + " is too large; allowed: a token count >= 1 and <= 9e15");
    return int64_t(*v);
  }
};

std::string strip_cell(std::string_view s) {
  std::string t = trim(s);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = trim(std::string_view(t).substr(1, t.size() - 2));
  return t;
}

void strip_bom(std::string& line) {
  if (line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
}

std::vector<Request> load_csv(std::istream& in, RequestReader& rr) {
  std::string line;
  int no = 0;
  std::vector<std::string> header;
  int header_line = 0;
  std::array<size_t, 3> col{};
  std::array<std::string, 3> names;
  std::vector<std::string> cells;
  while (std::getline(in, line)) {
    ++no;
    if (no == 1) strip_bom(line);
    if (trim(line).empty()) continue;
    cells = split_line(line);
    for (std::string& c : cells) c = strip_cell(c);
    if (header.empty()) {
      header = cells;
      header_line = no;
      for (int role = 0; role < 3; ++role) {
        std::optional<size_t> found;
        for (const std::string& want : kColumnNames[role]) {
          for (size_t i = 0; i < header.size() && !found; ++i)
            if (lower(header[i]) == want) found = i;
          if (found) break;
        }
        if (!found)
          rr.fail(no, kColumnNames[role][0],
                  "no such column; accepted names (any case): " + kAccepted[role] + "; the header has: " +
                      join(header));
        col[role] = *found;
        names[role] = header[*found];
      }
      continue;
    }
    std::array<std::string, 3> texts;
    for (int role = 0; role < 3; ++role) {
      if (col[role] >= cells.size())
        rr.fail(no, names[role],
                "missing: the line has " + std::to_string(cells.size()) + " fields, column " + names[role] +
                    " is field " + std::to_string(col[role] + 1));
      texts[role] = cells[col[role]];
    }
    rr.add(no, texts, names, false);
  }
  if (header.empty()) rr.fail(0, "", "the file is empty; expected a header line and one request a line");
  if (rr.empty())
    rr.fail(header_line, "", "no requests: the file has a header (line " + std::to_string(header_line) +
                                 ") but no rows after it");
  return rr.take();
}

std::vector<Request> load_jsonl(std::istream& in, RequestReader& rr) {
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (no == 1) strip_bom(line);
    if (trim(line).empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      rr.fail(no, "", std::string("not valid JSON (") + e.what() + "); expected one object a line");
    }
    if (!j.is_object()) rr.fail(no, "", std::string("expected a JSON object {...}, got a ") + j.type_name());
    std::array<std::string, 3> texts, names;
    bool milliseconds = false;
    for (int role = 0; role < 3; ++role) {
      const nlohmann::json* value = nullptr;
      for (const std::string& want : kColumnNames[role]) {
        for (auto it = j.begin(); it != j.end() && !value; ++it)
          if (lower(it.key()) == want) value = &it.value(), names[role] = it.key();
        if (value) {
          // Mooncake's traces give `timestamp` in milliseconds.
          if (role == kTime && want == "timestamp") milliseconds = true;
          break;
        }
      }
      if (!value)
        rr.fail(no, kColumnNames[role][0], "missing; accepted names (any case): " + kAccepted[role]);
      if (value->is_string()) texts[role] = trim(value->get<std::string>());
      else if (value->is_number()) texts[role] = value->dump();
      else rr.fail(no, names[role], "value " + value->dump() + " is not a number or a text");
    }
    rr.add(no, texts, names, milliseconds);
  }
  if (rr.empty()) rr.fail(0, "", "no requests: the file has no JSON lines");
  return rr.take();
}

bool looks_like_jsonl(const std::string& path, std::istream& in) {
  if (lower(fs::path(path).extension().string()) == ".jsonl") return true;
  // Otherwise the first non-blank character decides: a CSV header never starts with '{'.
  std::string line;
  bool json = false;
  while (std::getline(in, line)) {
    strip_bom(line);
    const std::string t = trim(line);
    if (t.empty()) continue;
    json = t.front() == '{';
    break;
  }
  in.clear();
  in.seekg(0);
  return json;
}

[[noreturn]] void fail_context(const WorkloadSpec& w, const Request& r, int64_t max_context) {
  const std::string what = "request " + std::to_string(r.id) + " has " + std::to_string(r.prompt_tokens) +
                           " prompt + " + std::to_string(r.output_tokens) + " output tokens = " +
                           std::to_string(r.prompt_tokens + r.output_tokens) +
                           ", beyond the model's context window; allowed: prompt + output <= " +
                           std::to_string(max_context);
  // Blame the prompt when it alone leaves no room for one output token, else the output.
  const bool prompt = r.prompt_tokens >= max_context;
  const LengthDist& d = prompt ? w.prompt : w.output;
  const std::string hint = d.kind == LengthDist::Kind::fixed ? "" : " (clamp the distribution with max:)";
  throw_input_error(w.file, 0, prompt ? "serving.prompt_tokens" : "serving.output_tokens", what + hint);
}

}  // namespace

int64_t LengthDist::sample(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::fixed:
      return value;
    case Kind::uniform:
      return min + int64_t(rng() % uint64_t(max - min + 1));
    case Kind::lognormal: {
      double v = std::round(median * std::exp(sigma * standard_normal(rng)));
      // Clamped as a double first: a wide sigma can overflow int64.
      v = std::max(v, double(min));
      if (max > 0) v = std::min(v, double(max));
      return int64_t(std::min(v, 9e15));
    }
    case Kind::empirical:
      return values.empty() ? 0 : values[size_t(rng() % values.size())];
  }
  return 0;
}

std::string LengthDist::describe() const {
  switch (kind) {
    case Kind::fixed:
      return "fixed " + std::to_string(value);
    case Kind::uniform:
      return "uniform " + std::to_string(min) + " .. " + std::to_string(max);
    case Kind::lognormal: {
      std::string s = "lognormal median " + format_number(median) + " sigma " + format_number(sigma);
      if (min != 1) s += " min " + std::to_string(min);
      if (max > 0) s += " max " + std::to_string(max);
      return s;
    }
    case Kind::empirical:
      return "empirical " + std::to_string(values.size()) + " values";
  }
  return "";
}

WorkloadSpec read_workload(YamlMap& m) {
  WorkloadSpec w;
  w.file = m.file();
  const std::string arrival = m.choice("arrival", {"poisson", "gamma", "trace"}, "poisson");
  w.arrivals.kind = arrival == "poisson" ? ArrivalSpec::Kind::poisson
                    : arrival == "gamma" ? ArrivalSpec::Kind::gamma
                                         : ArrivalSpec::Kind::trace;
  const bool trace = w.arrivals.kind == ArrivalSpec::Kind::trace;
  if (trace) {
    const std::string why = " does not apply to arrival: trace (the request file gives ";
    reject(m, "rate", "rate" + why + "the times; time_scale speeds them up or slows them down)");
    reject(m, "cv", "cv" + why + "the times)");
    reject(m, "prompt_tokens", "prompt_tokens" + why + "the lengths)");
    reject(m, "output_tokens", "output_tokens" + why + "the lengths)");
    const std::string file = resolve_path(m.string("trace"), m.file());
    if (!fs::exists(file))
      m.fail("trace", "file '" + file + "' not found (a relative path is resolved against the scenario's directory)");
    w.arrivals.file = file;
    w.time_scale = m.number("time_scale", Range::positive(), 1);
  } else {
    const std::string why = " applies to arrival: trace only";
    reject(m, "trace", "trace" + why + " (set arrival: trace to replay a request file)");
    reject(m, "time_scale", "time_scale" + why + " (change rate to scale generated arrivals)");
    w.arrivals.rate = m.number("rate", Range::positive(), 1);
    if (w.arrivals.kind == ArrivalSpec::Kind::gamma) w.arrivals.cv = m.number("cv", Range::positive(100), 1);
    else reject(m, "cv", "cv applies to arrival: gamma only (poisson's is 1)");
    w.prompt = read_length(m, "prompt_tokens", 8192);
    w.output = read_length(m, "output_tokens", 256);
  }
  // Read for a trace too (and unused there), so a scenario can switch between arrival kinds unchanged.
  w.seed = uint64_t(m.integer("seed", Range::at_least(0), 1));
  const bool has_requests = m.has("requests"), has_duration = m.has("duration_s");
  if (!trace && has_requests && has_duration)
    m.fail("duration_s", "give exactly one of requests and duration_s to bound a generated workload, not both");
  if (!trace && !has_requests && !has_duration)
    m.fail("requests", "missing: give exactly one of requests (a count) and duration_s (seconds of arrivals)");
  w.requests = m.integer("requests", Range::between(1, double(kMaxGenerated)), 0);
  w.duration_s = m.number("duration_s", Range::positive(), 0);
  return w;
}

std::vector<Request> make_requests(const WorkloadSpec& w, int64_t max_context) {
  std::vector<Request> out;
  if (w.arrivals.kind == ArrivalSpec::Kind::trace) {
    out = load_request_file(w.arrivals.file, max_context);
    for (Request& r : out) r.arrival_s *= w.time_scale;
    if (w.requests > 0 && int64_t(out.size()) > w.requests) out.resize(size_t(w.requests));
    if (w.duration_s > 0)
      out.erase(std::find_if(out.begin(), out.end(), [&](const Request& r) { return r.arrival_s >= w.duration_s; }),
                out.end());
    return out;
  }
  // Three streams, so that changing one distribution leaves the others' draws alone: a sweep over
  // output lengths sees the same arrival times and prompts at every point.
  std::mt19937_64 arrivals(w.seed);
  std::mt19937_64 prompts(w.seed + 0x9E3779B97F4A7C15ull);
  std::mt19937_64 outputs(w.seed + 2 * 0x9E3779B97F4A7C15ull);
  auto too_many = [&] {
    throw_input_error(w.file, 0, "serving.duration_s",
                      "rate " + format_number(w.arrivals.rate) + " over duration_s " + format_number(w.duration_s) +
                          " gives more than " + std::to_string(kMaxGenerated) +
                          " requests, the most a generated workload may have; shorten duration_s");
  };
  // Refused before generating: the expected count alone tells, and generating it first costs memory.
  if (w.requests <= 0 && w.arrivals.rate * w.duration_s > double(kMaxGenerated)) too_many();
  const bool gamma = w.arrivals.kind == ArrivalSpec::Kind::gamma;
  const double k = 1.0 / (w.arrivals.cv * w.arrivals.cv);
  const double scale = 1.0 / (w.arrivals.rate * k);
  double t = 0;
  for (int64_t i = 0;; ++i) {
    if (w.requests > 0 && i >= w.requests) break;
    t += gamma ? scale * standard_gamma(arrivals, k) : exponential(arrivals, w.arrivals.rate);
    if (w.requests <= 0 && t >= w.duration_s) break;
    if (i >= kMaxGenerated) too_many();
    Request r;
    r.id = i;
    r.arrival_s = t;
    r.prompt_tokens = w.prompt.sample(prompts);
    r.output_tokens = w.output.sample(outputs);
    if (r.prompt_tokens < 1 || r.output_tokens < 1)
      throw_input_error(w.file, 0, r.prompt_tokens < 1 ? "serving.prompt_tokens" : "serving.output_tokens",
                        "request " + std::to_string(i) + " drew a length < 1; allowed: lengths >= 1");
    if (r.prompt_tokens + r.output_tokens > max_context) fail_context(w, r, max_context);
    out.push_back(r);
  }
  if (out.empty())
    throw_input_error(w.file, 0, "serving.duration_s",
                      "no request arrives within duration_s " + format_number(w.duration_s) + " at rate " +
                          format_number(w.arrivals.rate) + "/s; lengthen duration_s or raise rate");
  return out;
}

std::vector<Request> load_request_file(const std::string& path, int64_t max_context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, 0, "", "cannot open file (does it exist and is it readable?)");
  if (fs::is_directory(path)) throw_input_error(path, 0, "", "is a directory; expected a CSV or JSONL request file");
  RequestReader rr(path, max_context);
  if (looks_like_jsonl(path, in)) return load_jsonl(in, rr);
  return load_csv(in, rr);
}

MedianRequest median_request(const std::vector<Request>& requests) {
  MedianRequest m;
  if (requests.empty()) return m;
  std::vector<double> prompts, outputs;
  prompts.reserve(requests.size()), outputs.reserve(requests.size());
  for (const Request& r : requests) prompts.push_back(double(r.prompt_tokens)), outputs.push_back(double(r.output_tokens));
  std::sort(prompts.begin(), prompts.end());
  std::sort(outputs.begin(), outputs.end());
  m.prompt = int64_t(std::llround(interpolated_quantile(prompts, 0.5)));
  m.output = std::max<int64_t>(1, std::llround(interpolated_quantile(outputs, 0.5)));
  return m;
}

}  // namespace kvsim::serve
