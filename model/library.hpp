// The data library: scenarios/{hardware,hosts,models,calibration,traces}/NAME.yaml (traces/ holds
// synthetic-trace presets, traces/synthetic/synthetic.hpp). Names resolve there;
// a value containing '/' or ending in .yaml is taken as a path instead. The library directory is the
// source tree's scenarios/ (compiled in), or $KVSIM_DATA_DIR when set.
#pragma once
#include <string>
#include <vector>

#include "model/calibration.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/model_config.hpp"

namespace kvsim {

enum class LibraryKind { hardware, host, model, calibration, trace, host_ops };

std::string library_dir();
std::string kind_dir(LibraryKind k);   // e.g. "<library>/hardware"
std::string kind_label(LibraryKind k); // "hardware", "host", "model", "calibration", "trace preset"
std::vector<std::string> library_names(LibraryKind k);  // sorted file stems

// Resolves a name or a path to a file. Unknown names throw InputError naming `file`/`line`/`field`
// (where the name was written), with a "did you mean" and the list of known names.
std::string resolve(LibraryKind k, const std::string& name_or_path, const std::string& file, int line,
                    const std::string& field);

GpuSpec load_gpu_file(const std::string& path);
HostSpec load_host_file(const std::string& path);
ModelConfig load_model_file(const std::string& path);
Calibration load_calibration_file(const std::string& path);

// The measured host every host without a measurement of its own borrows its host-side efficiencies
// from: this project's CI machine, measured by `kvsim validate --device cpu` (docs/validation/cpu.md).
inline constexpr const char* kDefaultHostCalibration = "ci-2core-cpu";

// The calibration a scenario gets when it names none (or `calibration: auto`): the GPU ceilings from
// `<gpu>-published` (`kvsim calibrate published`: kernel measurements others published), the host
// ceilings from `<host>-cpu` (`kvsim validate --device cpu` on that host) or, for a host never
// measured, from kDefaultHostCalibration — never the roofline's 1.0 for host phases. A side with no
// file keeps the roofline. The name and description say which files it combines.
Calibration default_calibration(const GpuSpec& gpu, const HostSpec& host);

}  // namespace kvsim
