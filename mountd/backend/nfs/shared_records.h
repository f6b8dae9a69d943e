// Shared records: the copy of each NFS volume's record that the node which
// created it keeps on the pool's export, at
//
//   <export>/.nodevol/volumes/<volume>.json
//
// so that every other node serving the pool can publish, expand or delete
// the volume: an NFS volume is one directory for all nodes, and its PV
// admits every node serving the pool (issue 26, item 5). The record, not a
// pod's flexVolume options, is what another node trusts: a pod author
// writes those options freely. A pod's volume never reaches `.nodevol`
// (path patterns may not render to it); whoever can write the export root
// (the server's owner, a pod given the whole export by an operator's
// class) can reach every volume's data anyway, and a record is accepted
// only for a directory of that same export (NfsBackend::FindShared), so a
// forged one gives nothing more. What is read is checked like any outside
// input (size, format, names, paths, options).
//
// Every function here may wait for the server: call them only on the
// server's worker (NfsServer::Call). `root` is the mounted export.
#pragma once

#include <string>

#include "base/status.h"

namespace nodevol {

// Largest record read back; a record is about 1 KiB.
inline constexpr size_t kMaxSharedRecordBytes = 64 * 1024;

// Writes `text` as the record of `volume`, atomically (a temp file synced,
// then renamed over the old one), making .nodevol/volumes (0700) if
// missing. Never follows a symlink below `root`. Each write has a temp of
// its own (a random name), so two nodes writing at once never mix: the
// record is one writer's whole text, the last to rename. Temps of writers
// killed mid-write go with the next write once a minute old by the
// server's clock (the new temp's mtime), never by this node's.
Status PutSharedRecord(const std::string& root, const std::string& volume, const std::string& text);

// Reads the record of `volume` into *text. NOT_FOUND when there is none;
// FAILED_PRECONDITION when what is there is no regular file or too large.
Status ReadSharedRecord(const std::string& root, const std::string& volume, std::string* text);

// Removes the record of `volume` and any temp of it; missing is success.
Status RemoveSharedRecord(const std::string& root, const std::string& volume);

}  // namespace nodevol
