// Crash-safe file primitives: nodevold's state dir, and any file a program
// must replace whole (certificates and keys).
//
// WriteFileAtomic leaves, after a crash at any instant, either the old file or
// the complete new one: it writes a temp file (".tmp-" prefix) in the same
// directory, fsyncs it, renames it over the target and fsyncs the directory.
// Leftover temp files are garbage and removed by RemoveTempFiles.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace nodevol {

inline constexpr std::string_view kTempPrefix = ".tmp-";

//
// With durable = false the fsyncs are skipped: the file is still replaced
// atomically as far as any process (and a kill -9) can tell, but a power
// loss may lose the change.
Status WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view contents,
                       bool durable = true, mode_t mode = 0600);
// Unlinks dir/name (and fsyncs dir when durable); a missing file is success.
Status RemoveFile(const std::string& dir, const std::string& name, bool durable = true);
// fsyncs a directory, making the renames and unlinks in it durable.
Status FsyncDir(const std::string& dir);
// Reads a whole file.
Status ReadWholeFile(const std::string& path, std::string* out);
// Creates dir (and parents) when missing and checks it is a directory. With
// enforce_mode an existing dir is chmod'ed to mode (for nodevold's own dirs);
// without, only a new dir gets it (for dirs shared with others, such as
// kubelet's pods root).
Status EnsureDir(const std::string& dir, mode_t mode, bool enforce_mode = true);
// Makes dir (one level, mode 0700) when missing and checks that it is a
// directory, not a symlink to one: nodevold's own staging directories.
// An existing dir keeps its mode.
Status MakePrivateDir(const std::string& dir);
// Removes the ".tmp-*" files a crash may have left in dir.
Status RemoveTempFiles(const std::string& dir);

// The status of a failed change to a file: FromErrno's message, but a
// filesystem full (ENOSPC, EDQUOT) or read-only (EROFS) is UNAVAILABLE, a
// condition to clear and retry rather than a bug, and says so.
Status FileChangeError(std::string_view what, int err);

}  // namespace nodevol
