#include "sweep/result_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/csv.hpp"

namespace kvsim::sweep {

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw_input_error(path, 0, "", "cannot read the results file");
  std::string text(size_t(in.tellg()), '\0');
  in.seekg(0);
  in.read(text.data(), std::streamsize(text.size()));
  return text;
}

[[noreturn]] void io_fail(const std::string& path, const char* what) {
  throw_input_error(path, 0, "", std::string(what) + ": " + std::strerror(errno));
}

uint64_t parse_u64(std::string_view s, int base, const std::string& file, size_t line, const char* column) {
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty())
    throw_input_error(file, int(line), column, "value '" + std::string(s) + "' is not a " +
                                                   (base == 16 ? "16-digit hex key" : "point number") +
                                                   " (is this a kvsim sweep results file?)");
  return v;
}
}  // namespace

uint64_t row_point(const std::string& row, const std::string& file) {
  return parse_u64(first_field(row), 10, file, 0, "point");
}
uint64_t row_key(const std::string& row, const std::string& file) {
  const size_t a = row.find(',');
  const size_t b = a == std::string::npos ? a : row.find(',', a + 1);
  if (b == std::string::npos) throw_input_error(file, 0, "key", "row '" + row.substr(0, 60) + "' has no key column");
  return parse_u64(std::string_view(row).substr(a + 1, b - a - 1), 16, file, 0, "key");
}

ResultTable read_results(const std::string& path) {
  const std::string text = read_all(path);
  ResultTable t;
  size_t pos = 0;
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) throw_input_error(path, 1, "", "no complete header line (an empty or truncated file)");
  t.header = text.substr(0, nl + 1);
  if (t.header.rfind("point,key,policy", 0) != 0)
    throw_input_error(path, 1, "", "the header does not start with point,key,policy: not a kvsim sweep results file");
  pos = nl + 1;
  while (pos < text.size()) {
    const size_t e = text.find('\n', pos);
    if (e == std::string::npos) break;  // a partial last line (killed mid-write) is not a row
    t.rows.emplace_back(text, pos, e - pos);
    pos = e + 1;
  }
  return t;
}

ResultFile::ResultFile(const std::string& path, const std::string& header) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(path, ec) && fs::file_size(path, ec) > 0;
  if (exists) {
    const ResultTable t = read_results(path);
    if (t.header != header)
      throw_input_error(path, 1, "", "the file holds results of a sweep with other columns (axes or trace changed); "
                                     "give another -o or remove the file");
    // Cut a partial last line left by a kill mid-write.
    size_t complete = t.header.size();
    for (const std::string& r : t.rows) complete += r.size() + 1;
    if (complete != fs::file_size(path)) fs::resize_file(path, complete);
    uint64_t prev = 0;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const uint64_t point = parse_u64(first_field(t.rows[i]), 10, path, i + 2, "point");
      const uint64_t key = row_key(t.rows[i], path);
      if (i > 0 && point <= prev) in_order_ = false;
      prev = point;
      max_point_ = std::max(max_point_, point);
      existing_[key] = {point, i};
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail(path, "cannot open the results file for appending");
  if (!exists) append(header);
}

ResultFile::~ResultFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultFile::append(const std::string& rows) {
  size_t done = 0;
  while (done < rows.size()) {
    const ssize_t n = ::write(fd_, rows.data() + done, rows.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail(path_, "cannot append to the results file");
    done += size_t(n);
  }
}

void ResultFile::sync() {
  sync_file(fd_, path_);
  sync_parent_directory(path_);
}

std::string merge_results(const std::vector<std::string>& paths) {
  if (paths.empty()) throw_input_error("command line", 0, "merge", "no input files given");
  std::string header;
  struct Entry {
    uint64_t point;
    size_t file;
    std::string row;
  };
  std::vector<Entry> all;
  for (size_t f = 0; f < paths.size(); ++f) {
    ResultTable t = read_results(paths[f]);
    if (f == 0) header = t.header;
    else if (t.header != header)
      throw_input_error(paths[f], 1, "", "its columns differ from " + paths[0] + "'s: shards of one sweep have the same header");
    for (size_t i = 0; i < t.rows.size(); ++i)
      all.push_back({parse_u64(first_field(t.rows[i]), 10, paths[f], i + 2, "point"), f, std::move(t.rows[i])});
  }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.point < b.point; });
  std::string out = header;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0 && all[i].point == all[i - 1].point) {
      if (all[i].row != all[i - 1].row)
        throw_input_error(paths[all[i].file], 0, "point",
                          "point " + std::to_string(all[i].point) + " differs from the same point in " +
                              paths[all[i - 1].file] + " (shards of different sweeps?)");
      continue;
    }
    out += all[i].row;
    out += '\n';
  }
  return out;
}

}  // namespace kvsim::sweep
