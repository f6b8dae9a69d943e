#include "backend/lvm/report.h"

#include <charconv>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace nodevol {
namespace {

using json = nlohmann::json;

std::string Str(const json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Sizes and numbers arrive as strings; "" means not applicable.
bool Uint(const json& row, const char* key, uint64_t* out) {
  std::string s = Str(row, key);
  if (s.empty()) return true;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

double Percent(const json& row, const char* key) {
  std::string s = Str(row, key);
  return s.empty() ? 0 : std::strtod(s.c_str(), nullptr);
}

int Int(const json& row, const char* key) {
  std::string s = Str(row, key);
  int v = -1;
  if (s.empty() || std::from_chars(s.data(), s.data() + s.size(), v).ec != std::errc()) return -1;
  return v;
}

std::vector<std::string> Tags(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Status BadReport(const std::string& what) { return Status::Internal("unexpected lvm fullreport output: " + what); }

}  // namespace

bool LvmVg::HasTag(std::string_view tag) const {
  for (const auto& t : tags)
    if (t == tag) return true;
  return false;
}

bool LvmLv::HasTag(std::string_view tag) const {
  for (const auto& t : tags)
    if (t == tag) return true;
  return false;
}

const LvmVg* LvmReport::FindVg(std::string_view name) const {
  for (const auto& vg : vgs)
    if (vg.name == name) return &vg;
  return nullptr;
}

const LvmLv* LvmReport::FindLv(std::string_view vg, std::string_view name) const {
  for (const auto& lv : lvs)
    if (lv.vg == vg && lv.name == name) return &lv;
  return nullptr;
}

std::vector<std::string> LvmReport::DependentsOf(const LvmLv& lv) const {
  std::vector<std::string> out;
  for (const auto& other : lvs)
    if (other.vg == lv.vg && other.origin == lv.name &&
        !(lv.thin_volume() && other.thin_volume() && other.HasTag(kManagedTag)))
      out.push_back("snapshot " + lv.vg + "/" + other.name);
  // A thin volume's pool_lv is its thin pool; any other LV with one has a
  // cache or writecache pool attached, which lvremove would take along.
  if (!lv.thin_volume() && !lv.pool_lv.empty()) out.push_back("cache " + lv.vg + "/" + lv.pool_lv);
  return out;
}

std::vector<std::string> FullReportArgs() {
  // lv_time in seconds since the epoch rather than the local date format.
  return {"fullreport", "--reportformat", "json", "--units", "b", "--nosuffix",
          "--config", "report/time_format=\"%s\"",
          "--configreport", "vg", "-o", "vg_name,vg_uuid,vg_size,vg_free,vg_extent_size,vg_tags,vg_missing_pv_count",
          "--configreport", "pv", "-o", "pv_name,vg_name,pv_size,pv_free",
          "--configreport", "lv", "-o",
          "lv_name,lv_uuid,vg_name,lv_path,lv_size,lv_attr,lv_tags,pool_lv,origin,lv_time,data_percent,"
          "metadata_percent,lv_metadata_size,lv_kernel_major,lv_kernel_minor",
          // The segment subreports are not read; ask for as little as allowed.
          "--configreport", "pvseg", "-o", "pvseg_start", "--configreport", "seg", "-o", "seg_size"};
}

Status ParseFullReport(std::string_view text, LvmReport* out) {
  *out = LvmReport{};
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    return BadReport(std::string("not JSON: ") + e.what());
  }
  auto reports = j.find("report");
  if (!j.is_object() || reports == j.end() || !reports->is_array()) return BadReport("no \"report\" array");
  for (const auto& r : *reports) {
    if (!r.is_object()) return BadReport("a report is not an object");
    for (const auto& row : r.value("vg", json::array())) {
      LvmVg vg;
      vg.name = Str(row, "vg_name");
      vg.uuid = Str(row, "vg_uuid");
      vg.tags = Tags(Str(row, "vg_tags"));
      if (vg.name.empty() || !Uint(row, "vg_size", &vg.size) || !Uint(row, "vg_free", &vg.free) ||
          !Uint(row, "vg_extent_size", &vg.extent_size) || !Uint(row, "vg_missing_pv_count", &vg.missing_pvs))
        return BadReport("vg row " + row.dump());
      out->vgs.push_back(std::move(vg));
    }
    for (const auto& row : r.value("pv", json::array())) {
      LvmPv pv;
      pv.name = Str(row, "pv_name");
      pv.vg = Str(row, "vg_name");
      if (pv.name.empty() || !Uint(row, "pv_size", &pv.size) || !Uint(row, "pv_free", &pv.free))
        return BadReport("pv row " + row.dump());
      out->pvs.push_back(std::move(pv));
    }
    for (const auto& row : r.value("lv", json::array())) {
      LvmLv lv;
      lv.name = Str(row, "lv_name");
      lv.vg = Str(row, "vg_name");
      lv.uuid = Str(row, "lv_uuid");
      lv.path = Str(row, "lv_path");
      lv.attr = Str(row, "lv_attr");
      lv.pool_lv = Str(row, "pool_lv");
      lv.origin = Str(row, "origin");
      uint64_t created = 0;
      if (!Uint(row, "lv_time", &created)) return BadReport("lv_time of lv row " + row.dump());
      lv.created_unix = static_cast<int64_t>(created);
      lv.tags = Tags(Str(row, "lv_tags"));
      lv.data_percent = Percent(row, "data_percent");
      lv.metadata_percent = Percent(row, "metadata_percent");
      lv.kernel_major = Int(row, "lv_kernel_major");
      lv.kernel_minor = Int(row, "lv_kernel_minor");
      if (lv.name.empty() || lv.vg.empty() || !Uint(row, "lv_size", &lv.size) ||
          !Uint(row, "lv_metadata_size", &lv.metadata_size))
        return BadReport("lv row " + row.dump());
      out->lvs.push_back(std::move(lv));
    }
  }
  return Status::Ok();
}

}  // namespace nodevol
