#include "core/durable.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace kvsim {

void sync_file(int fd, const std::string& path) {
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) throw_input_error(path, 0, "", std::string("cannot flush to disk (fsync): ") + std::strerror(errno));
}

void sync_parent_directory(const std::string& path) {
  // Built in one expression: GCC 12's -Wrestrict misreads an assignment of "." to the string (GCC bug 105329).
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(1, '.') : parent;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw_input_error(path, 0, "", "cannot open its directory '" + dir + "' to flush it: " + std::strerror(errno));
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw_input_error(path, 0, "", "cannot flush its directory '" + dir + "' to disk (fsync): " + std::strerror(err));
}

}  // namespace kvsim
