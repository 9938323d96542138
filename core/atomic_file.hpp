// Output files are written whole or not at all: to a temporary file beside the target, then renamed.
// A crash or a kill mid-write leaves the previous file (or none), never a partial one; the file is
// fsynced before the rename and its directory after it (core/durable.hpp), so that holds after a power
// cut too once write_file_atomic has returned.
#pragma once
#include <string>

namespace kvsim {
// Throws InputError naming the path when the directory is not writable.
void write_file_atomic(const std::string& path, const std::string& content);
}  // namespace kvsim
