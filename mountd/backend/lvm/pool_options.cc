#include "backend/lvm/pool_options.h"

#include <cstdlib>
#include <set>
#include <sstream>

#include "backend/lvm/lv_name.h"
#include "base/parse.h"
#include "base/size.h"

namespace nodevol {
namespace {

// lvcreate options nodevold sets itself; letting a pool override them
// would create LVs of the wrong size, name, type or without our tags.
const std::set<std::string> kOwnLvcreateOptions = {
    "-n", "--name", "-L", "--size", "-l", "--extents", "-V", "--virtualsize", "-T", "--thin",
    "--thinpool", "-s", "--snapshot", "--addtag", "-y", "--yes", "-W", "--wipesignatures", "-Z", "--zero"};

const std::set<std::string> kDiskKeys = {"devices", "match-model", "match-serial", "match-size",
                                         "match-rotational", "force"};

}  // namespace

const std::vector<std::string>& LvmFsTypes() {
  static const std::vector<std::string> kTypes = {"ext4", "xfs"};
  return kTypes;
}

Status ParseLvmPoolOptions(const std::string& pool, const Params& options, LvmPoolOptions* out) {
  auto bad = [&](const std::string& key, const std::string& why) {
    return Status::InvalidArgument("pool " + pool + ": lvm option " + key + ": " + why);
  };
  std::string type = "thick";
  bool thinpool_given = false, overprovision_given = false, thinpool_size_given = false;
  for (const auto& [k, v] : options) {
    if (k == "vg") {
      NODEVOL_RETURN_IF_ERROR(ValidateLvmName("volume group", v).WithContext("pool " + pool + ": lvm option vg"));
      out->vg = v;
    } else if (k == "type") {
      if (v != "thick" && v != "thin") return bad(k, "must be thick or thin, not \"" + v + "\"");
      type = v;
    } else if (k == "thinpool") {
      NODEVOL_RETURN_IF_ERROR(ValidateLvmName("thin pool", v).WithContext("pool " + pool + ": lvm option thinpool"));
      out->thinpool = v;
      thinpool_given = true;
    } else if (k == "thinpool-size") {
      thinpool_size_given = true;
      if (!v.empty() && v.back() == '%') {
        uint64_t pct = 0;
        NODEVOL_RETURN_IF_ERROR(ParseUint("pool " + pool + ": lvm option thinpool-size percent", v.substr(0, v.size() - 1),
                                          100, &pct));
        if (pct == 0) return bad(k, "0% is no thin pool");
        out->thinpool_percent = static_cast<unsigned>(pct);
      } else if (auto n = ParseSize(v)) {
        out->thinpool_bytes = *n;
      } else {
        return bad(k, "\"" + v + "\" is neither a size (e.g. 100Gi) nor a percentage of the VG (e.g. 90%)");
      }
    } else if (k == "overprovision") {
      char* end = nullptr;
      double r = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(r >= 1.0 && r <= 1000.0))
        return bad(k, "must be a ratio from 1.0 to 1000, not \"" + v + "\"");
      out->overprovision = r;
      overprovision_given = true;
    } else if (k == "fs") {
      bool known = false;
      for (const std::string& t : LvmFsTypes()) known |= (t == v);
      if (!known) return bad(k, "must be ext4 or xfs, not \"" + v + "\"");
      out->fs = v;
    } else if (k == "spare") {
      if (v == "0") {
        out->spare = 0;
      } else if (auto n = ParseSize(v)) {
        out->spare = *n;
      } else {
        return bad(k, "\"" + v + "\" is not a size (e.g. 10Gi)");
      }
    } else if (k == "lvcreate-options") {
      std::istringstream words(v);
      for (std::string w; words >> w;) {
        std::string flag = w.substr(0, w.find('='));
        if (kOwnLvcreateOptions.count(flag))
          return bad(k, flag + " is set by nodevold itself and cannot be given here");
        out->lvcreate_options.push_back(w);
      }
    } else if (!kDiskKeys.count(k)) {
      return Status::InvalidArgument("pool " + pool + ": unknown lvm option \"" + k +
                                     "\"; known: vg, type, thinpool, thinpool-size, overprovision, fs, spare, "
                                     "lvcreate-options, devices, match-model, match-serial, match-size, "
                                     "match-rotational, force");
    }
  }
  if (out->vg.empty()) return Status::InvalidArgument("pool " + pool + ": lvm pools need vg=<volume group>");
  out->thin = type == "thin";
  if (!out->thin && (thinpool_given || overprovision_given || thinpool_size_given))
    return Status::InvalidArgument("pool " + pool + ": thinpool, thinpool-size and overprovision need type=thin");
  return ParseDiskRules(options, &out->disks).WithContext("pool " + pool);
}

}  // namespace nodevol
