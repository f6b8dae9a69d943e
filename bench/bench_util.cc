#include "bench_util.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace bench {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

Mem ReadMem(pid_t pid) {
  Mem m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kb = std::atol(line.c_str() + 6);
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_kb = std::atol(line.c_str() + 6);
    if (line.rfind("RssAnon:", 0) == 0) m.anon_kb = std::atol(line.c_str() + 8);
    if (line.rfind("RssFile:", 0) == 0) m.file_kb = std::atol(line.c_str() + 8);
  }
  return m;
}

Mem ReadMemDetailed(pid_t pid) {
  Mem m = ReadMem(pid);
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Pss:", 0) == 0) m.pss_kb = std::atol(line.c_str() + 4);
  return m;
}

// utime + stime of pid in seconds (and its reaped children's).
double CpuSeconds(pid_t pid, bool with_children) {
  std::string s = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::stringstream ss(s.substr(rp + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; ss >> f && i <= 17; ++i)
    if (i == 14 || i == 15 || (with_children && (i == 16 || i == 17))) ticks += std::atof(f.c_str());
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string Mb(long kb) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", kb / 1024.0);
  return buf;
}

std::string Ms(double us) {
  char buf[32];
  if (us < 10000)
    std::snprintf(buf, sizeof buf, "%.3f", us / 1000.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f", us / 1000.0);
  return buf;
}

std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Nearest-rank percentile of an already sorted vector.
double Pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

std::string FsType(const std::string& path) {
  struct statfs s;
  if (::statfs(path.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    case 0x2FC12FC1: return "zfs";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(s.f_type));
  return buf;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      return Trim(c == std::string::npos ? line : line.substr(c + 1));
    }
  return "?";
}

std::string MemTotal() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemTotal:", 0) == 0) return Mb(std::atol(line.c_str() + 9));
  return "?";
}

std::string LoadAvg() {
  std::string s = ReadFile("/proc/loadavg");
  std::stringstream ss(s);
  std::string a, b, c;
  ss >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace bench

namespace bench {

std::string MakeTempDir(const std::string& parent, const std::string& prefix) {
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

}  // namespace bench
