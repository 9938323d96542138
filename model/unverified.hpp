// Constants in force that nobody could check against a primary source. Library files mark them in the
// value's comment ("kernel_us: 1.3  # estimate: UNVERIFIED ..."), the convention every hardware and host
// file follows (docs/scenarios.md). The plan lists each one it runs with, so an answer that rests on one
// says so beside the answer instead of only in a YAML comment.
#pragma once
#include <string>
#include <vector>

namespace kvsim {

struct UnverifiedConstant {
  std::string file;  // the library file, relative to the library (e.g. hardware/h100-sxm.yaml)
  std::string key;   // dotted path of the field (e.g. launch.kernel_us)
  int line = 0;      // 1-based
  std::string note;  // the comment after '#'
};

// Every field of a YAML file whose comment says UNVERIFIED: block-style keys, nested by indentation.
// A file that cannot be read has none (the loader that read it first has already said why).
std::vector<UnverifiedConstant> unverified_constants(const std::string& path, const std::string& shown_as);

// The unverified constants of a scenario's library hardware and host files (by name; a file given by
// path outside the library is read from that path when it exists).
std::vector<UnverifiedConstant> unverified_in_force(const std::string& gpu_name, const std::string& host_name);

}  // namespace kvsim
