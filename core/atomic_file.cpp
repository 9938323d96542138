#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/durable.hpp"
#include "core/error.hpp"

namespace kvsim {

namespace {
// Writes all of `content` to fd; false with errno set on failure.
bool write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_input_error(path, 0, "", std::string("cannot write: ") + std::strerror(errno));
  const auto fail = [&](const std::string& why) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw_input_error(path, 0, "", why);
  };
  if (!write_all(fd, content)) fail(std::string("write failed (disk full?): ") + std::strerror(errno));
  // The data reaches the disk before the name points at it: after a power cut the path holds the old
  // file or the new one, never a renamed file whose blocks were not written yet.
  try {
    sync_file(fd, path);
  } catch (const InputError& e) {
    fail(e.message);
  }
  if (::close(fd) != 0) {
    std::remove(tmp.c_str());
    throw_input_error(path, 0, "", std::string("write failed: ") + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw_input_error(path, 0, "", std::string("cannot replace file: ") + std::strerror(err));
  }
  sync_parent_directory(path);  // the rename itself survives a power cut
}

}  // namespace kvsim
