// JSON form of the records in the state dir.
//
// Each file carries "format": N. The rule (docs/architecture.md, "Record
// format"): a nodevold reads every format up to kRecordFormat and writes
// the lowest format that says what the record means; a field an older
// nodevold may safely ignore is added without a new format, anything it
// would misread (a new state, a field that changes the meaning of another)
// takes a new one. Parsing a newer format gives UNIMPLEMENTED, so the
// store can refuse it instead of treating it as corrupt; any other failure
// is FAILED_PRECONDITION.
//
// Format 2: a volume still being made from a snapshot or another volume
// (from_snapshot, from_volume). Format 1 readers would resume its create
// by making an empty filesystem; once ready, the record is format 1 again
// (the fields then only say where its content came from).
#pragma once

#include <string>

#include "base/status.h"
#include "node/snapshot.h"
#include "node/volume.h"

namespace nodevol {

inline constexpr int kRecordFormat = 2;

std::string VolumeToJson(const VolumeRecord& v);
Status VolumeFromJson(const std::string& text, VolumeRecord* v);
std::string PublicationToJson(const PublicationRecord& p);
Status PublicationFromJson(const std::string& text, PublicationRecord* p);
std::string SnapshotToJson(const SnapshotRecord& s);
Status SnapshotFromJson(const std::string& text, SnapshotRecord* s);

}  // namespace nodevol
