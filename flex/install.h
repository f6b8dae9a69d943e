// Install: puts the running driver into kubelet's volume plugin directory
// as <plugin dir>/nodevol.io~volume/volume, so that kubelet's fsnotify
// watcher never sees a partial executable: kubelet ignores names starting
// with '.', so everything is written under a dot name and renamed into
// place (the whole driver directory on first install, the executable on
// upgrade). Used by the packages' maintainer scripts and by hand.
#pragma once

#include <string>

namespace nodevol::flex {

inline constexpr const char* kDefaultPluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec";
inline constexpr const char* kDriverDir = "nodevol.io~volume";
inline constexpr const char* kDriverFile = "volume";

// Installs or upgrades; *message says what happened or what went wrong.
bool InstallDriver(const std::string& plugin_dir, std::string* message);
// Removes the driver directory (renamed away first, then deleted).
bool UninstallDriver(const std::string& plugin_dir, std::string* message);

}  // namespace nodevol::flex
