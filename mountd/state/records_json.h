// JSON form of the records in the state dir.
//
// Each file carries "format": N. The rule (docs/architecture.md, "Record
// format"): a nodevold reads every format up to kRecordFormat and writes
// kRecordFormat; a field an older nodevold may safely ignore is added
// without a new format, anything it would misread (a new state, a field
// that changes the meaning of another) takes format + 1. Parsing a newer
// format gives UNIMPLEMENTED, so the store can refuse it instead of
// treating it as corrupt; any other failure is FAILED_PRECONDITION.
#pragma once

#include <string>

#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

inline constexpr int kRecordFormat = 1;

std::string VolumeToJson(const VolumeRecord& v);
Status VolumeFromJson(const std::string& text, VolumeRecord* v);
std::string PublicationToJson(const PublicationRecord& p);
Status PublicationFromJson(const std::string& text, PublicationRecord* p);

}  // namespace nodevol
