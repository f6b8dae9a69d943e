// RunWithoutCapability: runs a function on a thread of its own that lacks
// one capability, so that the kernel's limits bind what it does although
// nodevold runs as root holding that capability.
//
// Capabilities belong to threads on Linux: capset(2) changes the calling
// thread only (glibc does not broadcast it to the others, as it does
// setuid). The new thread drops the capability from its effective,
// permitted and inheritable sets, so it cannot raise it again (a program
// it exec'd as root would get the bounding set back: the functions run
// this way exec nothing), and it ends when the function returns: no other thread,
// and no later work, runs without it. The caller waits for the function
// and gets its status; the thread serves the caller's call (its deadline,
// base/call_scope.h). When the capability cannot be dropped the function
// does not run (INTERNAL).
//
// The dir pool's copies run this way without CAP_SYS_RESOURCE: with it,
// ext4 lets root exceed a project's hard limit (the quota code's
// ignore_hardlimit), so a snapshot charged to a project of its own would
// not be bounded by that project. (ext4 still lets the thread, whose fsuid
// is 0, into the blocks reserved for root, s_resuid: what bounds a copy
// there is its budget, what it measured against the free space outside
// the reserve, fs/tree_copy.h.)
#pragma once

#include <functional>

#include "base/status.h"

namespace nodevol {

Status RunWithoutCapability(int capability, const std::function<Status()>& fn);

// Whether the calling thread has `capability` in its effective set.
bool HasEffectiveCapability(int capability);

}  // namespace nodevol
