// Helpers the node benchmarks share: a process's memory and CPU from
// /proc, percentiles, and how figures are printed in docs/benchmarks.md.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace bench {

std::string ReadFile(const std::string& path);
std::string Trim(std::string s);

// A process's memory, in kB (0 when unreadable).
struct Mem {
  long rss_kb = 0;
  long hwm_kb = 0;
  long anon_kb = 0;  // RssAnon: heap, stacks
  long file_kb = 0;  // RssFile: mapped binary and shared libraries
  long pss_kb = 0;   // Pss (smaps_rollup): RSS with shared pages split among their users
};
// VmRSS, VmHWM, RssAnon and RssFile from /proc/<pid>/status.
Mem ReadMem(pid_t pid);
// ReadMem plus Pss, which walks the page tables (slower).
Mem ReadMemDetailed(pid_t pid);
// utime + stime of pid in seconds; with_children adds those of the
// children it has reaped.
double CpuSeconds(pid_t pid, bool with_children = false);

// A new directory parent/prefixXXXXXX (mkdtemp); "" and errno on failure.
std::string MakeTempDir(const std::string& parent, const std::string& prefix);

std::string Mb(long kb);         // "19.2 MiB"
std::string Ms(double us);       // microseconds as milliseconds, 3 decimals below 10 ms
std::string Fixed(double v, int digits);  // "-" for NAN
// Nearest-rank percentile of an already sorted vector (NAN when empty).
double Pct(const std::vector<double>& sorted, double p);

// What the report says about the machine.
std::string FsType(const std::string& path);
std::string CpuModel();
std::string MemTotal();
std::string LoadAvg();

}  // namespace bench
