// A sweep's results file on disk: CSV, one row per point, appended as points finish (a resumable
// journal). Each append is one write(2) of whole rows, so when it returns the rows are in the kernel's
// page cache and survive the process being killed. A kill mid-write can leave a partial last line;
// opening the file cuts it off. Rows are identified by their key (second column), so a rerun skips the
// points already present. There is no fsync per row (it would cost a disk flush per point): sync() is
// called once the sweep has evaluated every point, so a power cut during a sweep can lose the latest
// rows (the resume recomputes them), never make a finished sweep's file partial.
// (docs/robustness.md, "Crash safety and durability".)
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvsim::sweep {

struct ExistingRow {
  uint64_t point = 0;
  size_t line = 0;  // index among the data rows
};

class ResultFile {
 public:
  // Opens or creates `path`. An existing file must have exactly `header` (the same sweep layout);
  // otherwise an InputError names the file and says what differs.
  ResultFile(const std::string& path, const std::string& header);
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  const ExistingRow* find(uint64_t key) const {
    const auto it = existing_.find(key);
    return it == existing_.end() ? nullptr : &it->second;
  }
  size_t existing_rows() const { return existing_.size(); }
  bool existing_in_order() const { return in_order_; }  // point numbers strictly increasing
  uint64_t max_existing_point() const { return max_point_; }
  void append(const std::string& rows);
  void sync();  // fsync the file and its directory (core/durable.hpp)
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::unordered_map<uint64_t, ExistingRow> existing_;
  bool in_order_ = true;
  uint64_t max_point_ = 0;
};

// The header line (with its newline) and the data rows (without) of a results file.
struct ResultTable {
  std::string header;
  std::vector<std::string> rows;
};
ResultTable read_results(const std::string& path);
uint64_t row_point(const std::string& row, const std::string& file);  // the first column
uint64_t row_key(const std::string& row, const std::string& file);    // the second column

// Joins shard files: same header required, rows sorted by point, a point present twice must be the
// same row. The text of the merged file.
std::string merge_results(const std::vector<std::string>& paths);

}  // namespace kvsim::sweep
