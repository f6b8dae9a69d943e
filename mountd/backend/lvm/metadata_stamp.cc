// LvmProbe::MetadataStamp's reading of the LVM2 on-disk format (lvm2's
// lib/format_text/layout.h and lib/label/label.h, stable since 2002):
// a 512-byte label "LABELONE" ... "LVM2 001" in one of the first four
// sectors, then the PV header: the PV's UUID, its size, a zero-terminated
// list of data areas and one of metadata areas. Each metadata area starts
// with an mda_header (magic " LVM2 x[5A%r0N*>") whose first raw_locn says
// where the committed metadata text is, how long it is, and its checksum.
// lvm writes a new text (new offset, new checksum) on every change.
#include <endian.h>

#include <cstring>

#include "backend/lvm/lvm_probe.h"

namespace nodevol {
namespace {

constexpr size_t kSector = 512;
constexpr char kMdaMagic[] = " LVM2 x[5A%r0N*>";

uint64_t Le64(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return le64toh(v);
}

uint32_t Le32(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return le32toh(v);
}

Status NotAPvLabel(const std::string& why) { return Status::Internal("not an LVM2 physical volume label: " + why); }

}  // namespace

Status StampFromLabel(const std::string& first_4k,
                      const std::function<Status(uint64_t offset, std::string* sector)>& read_mda, std::string* stamp) {
  size_t label = std::string::npos;
  for (size_t s = 0; s < 4 && (s + 1) * kSector <= first_4k.size(); ++s) {
    if (first_4k.compare(s * kSector, 8, "LABELONE") == 0 && Le64(first_4k, s * kSector + 8) == s &&
        first_4k.compare(s * kSector + 24, 8, "LVM2 001") == 0) {
      label = s * kSector;
      break;
    }
  }
  if (label == std::string::npos) return NotAPvLabel("no LABELONE in the first four sectors");
  size_t at = label + Le32(first_4k, label + 20);  // offset_xl: the PV header
  const size_t end = label + kSector;
  if (at < label + 32 || at + 40 > end) return NotAPvLabel("PV header outside its sector");
  at += 32 + 8;  // PV UUID, device size
  // Data areas, then metadata areas; each list ends with a zero offset.
  for (int list = 0; list < 2; ++list) {
    for (;;) {
      if (at + 16 > end) return NotAPvLabel("area list runs past its sector");
      uint64_t offset = Le64(first_4k, at), size = Le64(first_4k, at + 8);
      at += 16;
      if (offset == 0) break;
      if (list == 0) continue;
      std::string header;
      NODEVOL_RETURN_IF_ERROR(read_mda(offset, &header));
      if (header.size() < kSector || header.compare(4, 16, kMdaMagic) != 0)
        return NotAPvLabel("no metadata area header at byte " + std::to_string(offset));
      // mda_header: checksum(4) magic(16) version(4) start(8) size(8), then
      // raw_locns: offset(8) size(8) checksum(4) flags(4).
      *stamp += std::to_string(offset) + "+" + std::to_string(size) + ":" + std::to_string(Le64(header, 40)) + "," +
                std::to_string(Le64(header, 48)) + "," + std::to_string(Le32(header, 56)) + ";";
    }
  }
  return Status::Ok();
}

}  // namespace nodevol
