#include "rl/health/cgroup_text.h"

#include <charconv>
#include <cstdint>
#include <sstream>

namespace rl::health {
namespace {

bool HasToken(const std::string& list, const std::string& token, char sep) {
  std::stringstream in(list);
  for (std::string t; std::getline(in, t, sep);) {
    if (t == token) return true;
  }
  return false;
}

// The text without the blanks and newline around it.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A whole decimal integer, nothing else.
std::optional<int64_t> WholeInt(std::string_view s) {
  int64_t v = 0;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || err != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A mountinfo path field: the kernel writes space, tab, newline and backslash as \NNN octal.
std::string UnescapeMountPath(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        field[i + 1] >= '0' && field[i + 1] <= '3' && field[i + 2] >= '0' && field[i + 2] <= '7' &&
        field[i + 3] >= '0' && field[i + 3] <= '7') {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

std::optional<CgroupMount> CpuMountFrom(std::string_view mountinfo) {
  std::istringstream in{std::string(mountinfo)};
  std::optional<CgroupMount> v2;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options, word;
    if (!(f >> id >> parent >> dev >> root >> point >> options)) continue;
    while (f >> word && word != "-") {
    }
    std::string fstype, source, super;
    if (word != "-" || !(f >> fstype >> source >> super)) continue;
    root = UnescapeMountPath(root);
    point = UnescapeMountPath(point);
    if (fstype == "cgroup" && HasToken(super, "cpu", ',')) return CgroupMount{root, point, false};
    if (fstype == "cgroup2" && !v2) v2 = CgroupMount{root, point, true};
  }
  return v2;
}

std::string CpuGroupFrom(std::string_view proc_cgroup, bool v2) {
  std::istringstream in{std::string(proc_cgroup)};
  for (std::string line; std::getline(in, line);) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty() : HasToken(controllers, "cpu", ',')) {
      return line.substr(b + 1);
    }
  }
  return "";
}

std::string GroupDirOf(const CgroupMount& m, const std::string& group) {
  std::string rel = group;
  // The root comes off only as whole path components: root /a is not a prefix of /ab.
  if (m.root != "/" && rel.compare(0, m.root.size(), m.root) == 0 &&
      (rel.size() == m.root.size() || rel[m.root.size()] == '/')) {
    rel = rel.substr(m.root.size());
  }
  if (rel == "/") rel.clear();
  return m.point + rel;
}

bool HandsDownCpu(std::string_view subtree_control) {
  const std::string_view t = Trim(subtree_control);
  return HasToken(std::string(t.substr(0, t.find('\n'))), "cpu", ' ');
}

Result<double> QuotaFromCpuMax(std::string_view text, const std::string& where) {
  const std::string_view t = Trim(text);
  const size_t space = t.find(' ');
  const std::string bad = where + ": '" + std::string(t) + "' is not 'QUOTA PERIOD' (cpu.max)";
  if (space == std::string_view::npos) return Status::DataError(bad);
  const std::string_view quota = t.substr(0, space);
  const std::optional<int64_t> period = WholeInt(Trim(t.substr(space + 1)));
  if (!period || *period <= 0) return Status::DataError(bad);
  if (quota == "max") return -1.0;
  const std::optional<int64_t> q = WholeInt(quota);
  if (!q || *q <= 0) return Status::DataError(bad);
  return static_cast<double>(*q) / static_cast<double>(*period);
}

Result<double> QuotaFromCfs(std::string_view quota, std::string_view period, const std::string& where) {
  const std::optional<int64_t> q = WholeInt(Trim(quota)), p = WholeInt(Trim(period));
  if (!q || !p || *p <= 0 || (*q < 0 && *q != -1) || *q == 0) {
    return Status::DataError(where + ": quota '" + std::string(Trim(quota)) + "', period '" +
                             std::string(Trim(period)) + "' (cpu.cfs_quota_us, cpu.cfs_period_us)");
  }
  return *q < 0 ? -1.0 : static_cast<double>(*q) / static_cast<double>(*p);
}

}  // namespace rl::health
