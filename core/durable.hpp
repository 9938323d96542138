// Durability: data written with write(2) is in the kernel's page cache, which survives the process
// being killed but not a power cut or a kernel crash. fsync(2) of the file forces its data to the
// disk; a rename or a file creation is only durable once the DIRECTORY holding the name is fsynced too.
// Every output that kvsim renames into place (core/atomic_file.hpp, SafetensorsWriter) does both,
// so after a power cut the path holds the old complete file or the new complete one
// (docs/robustness.md, "Crash safety and durability").
#pragma once
#include <string>

namespace kvsim {
// fsync(fd); on failure throws InputError naming `path` and the system's reason.
void sync_file(int fd, const std::string& path);
// fsync of the directory that holds `path` (its parent, "." for a bare name); InputError on failure.
void sync_parent_directory(const std::string& path);
}  // namespace kvsim
