// JSON form of the records in the state dir. Each file carries
// "format": 1 so a later nodevold can migrate older files.
#pragma once

#include <string>

#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

std::string VolumeToJson(const VolumeRecord& v);
Status VolumeFromJson(const std::string& text, VolumeRecord* v);
std::string PublicationToJson(const PublicationRecord& p);
Status PublicationFromJson(const std::string& text, PublicationRecord* p);

}  // namespace nodevol
