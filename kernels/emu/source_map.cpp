#include "kernels/emu/source_map.hpp"

#include <cxxabi.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "kernels/emu/thread_context.hpp"

namespace kvsim::emu::checker {
namespace {

// The file as the reports show it: from the project's kernels/ or tests/ folder on when the path has
// one (the build may record it absolute or relative to the build folder).
std::string display_path(const std::string& path) {
  for (const char* top : {"kernels/", "tests/"}) {
    for (size_t at = path.find(top); at != std::string::npos; at = path.find(top, at + 1))
      if (at == 0 || path[at - 1] == '/') return path.substr(at);
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Judged: code of a kernel source. Not judged: the emulator's own headers, the standard library and
// anything else outside the project, and code without line information.
bool is_kernel_source(const std::string& path) {
  if (path.empty() || path == "?") return false;
  if (path.find("kernels/emu/") != std::string::npos) return false;
  if (path.rfind("/usr/", 0) == 0 || path.find("/include/c++/") != std::string::npos) return false;
  return true;
}

class Lines {
 public:
  static Lines& get() {
    static Lines* l = new Lines;  // never destroyed: callbacks may run during static destruction
    return *l;
  }

  const SourceLine& at_pc(uintptr_t pc) {
    std::lock_guard lock(mu_);
    auto it = by_pc_.find(pc);
    if (it != by_pc_.end()) return *it->second;
    // pc is a return address: the call is the instruction before it.
    const Row* r = row_at(pc - 1);
    return *(by_pc_[pc] = r ? add(files_by_index_[r->file], r->line) : add("?", 0));
  }

  // Reads the line table of the module that holds the emulator (and with it the kernels), once. libdw
  // needs more stack than a GPU thread's fiber has (kernels/emu/stack_pool.hpp), so this runs from
  // launch_begin, on the launching host thread's own stack, never from an access callback.
  void load() {
    std::lock_guard lock(mu_);
    if (loaded_) return;
    loaded_ = true;
    char* debuginfo_path = nullptr;
    const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr,
                                      &debuginfo_path};
    Dwfl* dwfl = dwfl_begin(&callbacks);
    if (!dwfl) return;
    if (dwfl_linux_proc_report(dwfl, getpid()) == 0 && dwfl_report_end(dwfl, nullptr, nullptr) == 0) {
      Dwfl_Module* m = dwfl_addrmodule(dwfl, reinterpret_cast<Dwarf_Addr>(&source_line_by_id));
      Dwarf_Addr bias = 0;
      for (Dwarf_Die* cu = nullptr; m && (cu = dwfl_module_nextcu(m, cu, &bias)) != nullptr;) {
        size_t n = 0;
        if (dwfl_getsrclines(cu, &n) != 0) continue;
        for (size_t i = 0; i < n; ++i) {
          Dwfl_Line* l = dwfl_onesrcline(cu, i);
          Dwarf_Addr addr = 0;
          int line = 0;
          const char* file = l ? dwfl_lineinfo(l, &addr, &line, nullptr, nullptr, nullptr) : nullptr;
          if (!file) continue;
          Dwarf_Addr lbias = 0;
          bool end = false;
          if (Dwarf_Line* dl = dwfl_dwarf_line(l, &lbias)) dwarf_lineendsequence(dl, &end);
          auto [f, fresh] = file_index_.emplace(file, uint32_t(files_by_index_.size()));
          if (fresh) files_by_index_.push_back(file);
          rows_.push_back({uintptr_t(addr), f->second, unsigned(line), end});
        }
      }
    }
    dwfl_end(dwfl);
    // By address; where one sequence ends and another begins, the beginning wins.
    std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) {
      return a.addr != b.addr ? a.addr < b.addr : a.end > b.end;
    });
  }

  const SourceLine& at_site(const std::source_location& s) {
    std::lock_guard lock(mu_);
    const Site key{s.file_name(), s.line(), s.column()};
    auto it = by_site_.find(key);
    if (it != by_site_.end()) return *it->second;
    return *(by_site_[key] = add(s.file_name(), s.line()));
  }

  const SourceLine& by_id(uint32_t id) {
    std::lock_guard lock(mu_);
    return lines_.at(id);
  }

 private:
  struct Site {
    const char* file;
    unsigned line, column;
    bool operator==(const Site&) const = default;
  };
  struct SiteHash {
    size_t operator()(const Site& s) const {
      return std::hash<const void*>()(s.file) ^ (size_t(s.line) << 16) ^ size_t(s.column);
    }
  };

  const SourceLine* add(const std::string& path, unsigned line) {
    SourceLine l;
    l.file = files_.insert(display_path(path)).first->c_str();
    l.line = line;
    l.kernel = is_kernel_source(path);
    l.id = uint32_t(lines_.size());
    lines_.push_back(l);
    return &lines_.back();
  }

  struct Row {
    uintptr_t addr;
    uint32_t file;
    unsigned line;
    bool end;  // the end of a sequence: no code from here on
  };
  const Row* row_at(uintptr_t pc) const {
    auto it = std::upper_bound(rows_.begin(), rows_.end(), pc, [](uintptr_t a, const Row& r) { return a < r.addr; });
    if (it == rows_.begin()) return nullptr;
    --it;
    return it->end ? nullptr : &*it;
  }

  std::mutex mu_;
  bool loaded_ = false;
  std::vector<Row> rows_;
  std::unordered_map<std::string, uint32_t> file_index_;
  std::vector<std::string> files_by_index_;
  std::unordered_map<uintptr_t, const SourceLine*> by_pc_;
  std::unordered_map<Site, const SourceLine*, SiteHash> by_site_;
  std::deque<SourceLine> lines_;  // stable addresses
  std::set<std::string> files_;   // the file names the lines point to
};

// "void ns::(anonymous namespace)::topk_kernel<8>(kvsim::opt::TopkParams)::hist" -> "topk_kernel<8>::hist":
// the function's own name (no scope, return type or parameters) and the variable's.
std::string short_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  const std::string s = status == 0 && d ? d.get() : mangled;
  const size_t var = s.rfind("::");
  if (var == std::string::npos) return s;
  std::string fn = s.substr(0, var);
  if (!fn.empty() && fn.back() == ')') {  // drop the parameter list: back to its matching '('
    int depth = 0;
    for (size_t i = fn.size(); i-- > 0;) {
      depth += fn[i] == ')' ? 1 : fn[i] == '(' ? -1 : 0;
      if (depth == 0) {
        fn.erase(i);
        break;
      }
    }
  }
  int angle = 0;  // keep what follows the last "::" or space outside template arguments
  size_t start = 0;
  for (size_t i = 0; i < fn.size(); ++i) {
    angle += fn[i] == '<' ? 1 : fn[i] == '>' ? -1 : 0;
    if (angle == 0 && (fn[i] == ' ' || (fn[i] == ':' && i + 1 < fn.size() && fn[i + 1] == ':'))) start = i + 1;
    if (angle == 0 && fn[i] == ':' && i + 1 < fn.size() && fn[i + 1] == ':') start = i + 2;
  }
  return fn.substr(start) + s.substr(var);
}

struct Module {
  std::string file;
  size_t tls_bytes = 0;
  const void* tls_data = nullptr;  // the calling thread's TLS block of the module (glibc's dlpi_tls_data)
};

int find_module(dl_phdr_info* info, size_t, void* data) {
  auto* m = static_cast<Module*>(data);
  const auto me = reinterpret_cast<uintptr_t>(&find_module);
  bool mine = false;
  size_t tls = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
      if (me >= lo && me < lo + ph.p_memsz) mine = true;
    }
    if (ph.p_type == PT_TLS) tls = ph.p_memsz;
  }
  if (!mine) return 0;
  m->file = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
  m->tls_bytes = tls;
  m->tls_data = info->dlpi_tls_data;
  return 1;
}

StaticSharedTable load_static_shared() {
  StaticSharedTable t;
  // Touch this thread's tls_thread first: a dlopen'ed module (the Python extension) gets its TLS block
  // on first use, and dlpi_tls_data is null until then.
  const auto anchor_address = reinterpret_cast<uintptr_t>(&tls_thread);
  Module mod;
  dl_iterate_phdr(find_module, &mod);
  if (mod.file.empty()) {
    t.problem = "the module holding the emulator was not found";
    return t;
  }
  t.tls_bytes = mod.tls_bytes;
  elf_version(EV_CURRENT);
  const int fd = open(mod.file.c_str(), O_RDONLY);
  if (fd < 0) {
    t.problem = "cannot open " + mod.file;
    return t;
  }
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool anchor = false;
  for (Elf_Scn* scn = elf ? elf_nextscn(elf, nullptr) : nullptr; scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, int(i), &sym) || GELF_ST_TYPE(sym.st_info) != STT_TLS || sym.st_shndx == SHN_UNDEF)
        continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name) continue;
      if (std::strcmp(name, "_ZN5kvsim3emu10tls_threadE") == 0) {
        t.anchor_offset = sym.st_value;
        anchor = true;
      }
      // Function-local thread_locals, the emulator's own excepted: __shared__ arrays (and host code's
      // scratch, which no kernel touches).
      if (std::strncmp(name, "_ZZ", 3) == 0 && std::strncmp(name, "_ZZN5kvsim3emu", 14) != 0 && sym.st_size > 0)
        t.arrays.push_back({sym.st_value, size_t(sym.st_size), short_name(name), 0});
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  if (!anchor) {
    t.problem = "no symbol table with kvsim::emu::tls_thread in " + mod.file + " (a stripped binary?)";
    t.arrays.clear();
    // The block itself is still known from the loader (this thread's block and tls_thread in it), so its
    // addresses, __shared__ arrays among them, are told apart from host pointers; the arrays' bounds and
    // races are not checked.
    if (mod.tls_data) {
      t.anchor_offset = anchor_address - reinterpret_cast<uintptr_t>(mod.tls_data);
      t.block_known = true;
    }
    return t;
  }
  std::sort(t.arrays.begin(), t.arrays.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (auto& a : t.arrays) {
    a.shadow_base = t.shadow_bytes;
    t.shadow_bytes += a.bytes;
  }
  t.loaded = t.block_known = true;
  return t;
}

}  // namespace

const SourceLine& source_line_uncached(uintptr_t pc) { return Lines::get().at_pc(pc); }

const SourceLine& source_line(const std::source_location& site) {
  struct Entry {
    const char* file = nullptr;
    unsigned line = 0, column = 0;
    const SourceLine* l = nullptr;
  };
  thread_local Entry cache[256];
  Entry& e = cache[(reinterpret_cast<uintptr_t>(site.file_name()) ^ site.line() * 31u ^ site.column()) & 255u];
  if (e.l && e.file == site.file_name() && e.line == site.line() && e.column == site.column()) return *e.l;
  const SourceLine& l = Lines::get().at_site(site);
  e = {site.file_name(), site.line(), site.column(), &l};
  return l;
}
const SourceLine& source_line_by_id(uint32_t id) { return Lines::get().by_id(id); }
void load_source_lines() { Lines::get().load(); }

const StaticSharedTable& static_shared() {
  static const StaticSharedTable t = load_static_shared();
  return t;
}

const StaticSharedArray* static_shared_at(uintptr_t off) {
  const auto& a = static_shared().arrays;
  auto it = std::upper_bound(a.begin(), a.end(), off, [](uintptr_t o, const StaticSharedArray& x) { return o < x.offset; });
  if (it == a.begin()) return nullptr;
  --it;
  return off < it->offset + it->bytes ? &*it : nullptr;
}

}  // namespace kvsim::emu::checker
