// Calls: each FlexVolume call kubelet makes, turned into one Reply.
//
// args[0] is the call (init, mount, unmount, expandfs, ...), the rest its
// arguments exactly as kubelet passes them (flexvolume-contract.md
// section 3). Every input, however malformed, gets a Reply; the attach
// family always answers "Not supported", which kubelet caches per probe.
#pragma once

#include <string>
#include <vector>

#include "reply.h"

namespace nodevol::flex {

Reply RunCall(const std::vector<std::string>& args);

}  // namespace nodevol::flex
