#include "model/library.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"

#ifndef KVSIM_DEFAULT_DATA_DIR
#define KVSIM_DEFAULT_DATA_DIR "scenarios"
#endif

namespace fs = std::filesystem;

namespace kvsim {

std::string library_dir() {
  if (const char* env = std::getenv("KVSIM_DATA_DIR"); env && *env) return env;
  return KVSIM_DEFAULT_DATA_DIR;
}

std::string kind_label(LibraryKind k) {
  switch (k) {
    case LibraryKind::hardware: return "hardware";
    case LibraryKind::host: return "host";
    case LibraryKind::model: return "model";
    case LibraryKind::calibration: return "calibration";
    case LibraryKind::trace: return "trace preset";
    case LibraryKind::host_ops: return "host-ops profile";
  }
  return "?";
}

std::string kind_dir(LibraryKind k) {
  static const char* sub[] = {"hardware", "hosts", "models", "calibration", "traces", "host-ops"};
  return library_dir() + "/" + sub[int(k)];
}

std::vector<std::string> library_names(LibraryKind k) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kind_dir(k), ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve(LibraryKind k, const std::string& name, const std::string& file, int line,
                    const std::string& field) {
  const bool is_path = name.find('/') != std::string::npos ||
                       (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0);
  // The error_code overloads: a name from a file can be anything (too long for the file system, full
  // of control bytes), and the throwing fs::exists would escape as a filesystem_error, not an InputError.
  std::error_code ec;
  if (is_path) {
    if (!fs::exists(name, ec))
      throw_input_error(file, line, field,
                        "file '" + name + "' does not exist" + (ec ? " (" + ec.message() + ")" : std::string()));
    return name;
  }
  const std::string path = kind_dir(k) + "/" + name + ".yaml";
  if (fs::exists(path, ec)) return path;
  const auto names = library_names(k);
  throw_input_error(file, line, field,
                    "unknown " + kind_label(k) + " '" + name + "'" + suggestion(name, names) + "; available in " +
                        kind_dir(k) + ": " + join(names));
}

GpuSpec load_gpu_file(const std::string& path) { return load_gpu(YamlMap(load_yaml_file(path), path, "")); }
HostSpec load_host_file(const std::string& path) { return load_host(YamlMap(load_yaml_file(path), path, "")); }
ModelConfig load_model_file(const std::string& path) {
  return load_model(YamlMap(load_yaml_file(path), path, ""));
}
Calibration load_calibration_file(const std::string& path) {
  return load_calibration(YamlMap(load_yaml_file(path), path, ""));
}

Calibration default_calibration(const GpuSpec& gpu, const HostSpec& host) {
  const std::string dir = kind_dir(LibraryKind::calibration);
  std::error_code ec;
  auto file_of = [&](const std::string& name) {
    const std::string path = dir + "/" + name + ".yaml";
    return fs::exists(path, ec) ? path : std::string();
  };
  const std::string roofline_path = file_of("roofline");
  const Calibration roof = roofline_path.empty() ? Calibration() : load_calibration_file(roofline_path);
  const std::string gpu_name = gpu.name + "-published", own_host = host.name + "-cpu";
  const std::string gpu_path = file_of(gpu_name);
  std::string host_name = own_host, host_path = file_of(own_host);
  const bool borrowed_host = host_path.empty();
  if (borrowed_host) host_name = kDefaultHostCalibration, host_path = file_of(host_name);
  if (gpu_path.empty() && host_path.empty()) return roof;
  const Calibration g = gpu_path.empty() ? roof : load_calibration_file(gpu_path);
  const Calibration h = host_path.empty() ? roof : load_calibration_file(host_path);
  const std::string gname = gpu_path.empty() ? "roofline" : gpu_name, hname = host_path.empty() ? "roofline" : host_name;
  std::string desc = "GPU " + gpu.name + ": " +
                     (gpu_path.empty() ? std::string("roofline (no published measurements)") : g.description) +
                     "; host " + host.name + ": " + (host_path.empty() ? std::string("roofline") : h.description);
  if (borrowed_host && !host_path.empty())
    desc += " (" + host.name + " has no measurement of its own: the default measured host)";
  return combine_calibrations(g, h, gname + " + " + hname, desc);
}

}  // namespace kvsim
