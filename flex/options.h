// Options: kubelet's options JSON for mount and expandfs, read into what
// nodevold needs.
//
// The JSON is a flat map of strings: keys kubelet adds under kubernetes.io/
// (read-write flag, fsType, pod identity, fsGroup, base64 secrets) and the
// PV's or inline volume's own options. `volume` names an existing volume
// (with `pool`, its pool: where a node that does not know an NFS volume
// looks for it);
// without it, `pool` + `size` describe an inline ephemeral volume whose other
// user keys are backend parameters (checked by nodevold, so a misspelt
// `mdoe` fails instead of giving a volume the wrong mode). Other keys are
// tolerated. Error messages never contain a value the driver does not know
// to be harmless: secrets, and anything else, stay out of them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nodevol::flex {

struct InlineSpec {
  std::string pool;
  uint64_t size_bytes = 0;
  std::string fs_type;
  std::map<std::string, std::string> parameters;
};

struct PodInfo {
  std::string uid, name, namespace_, service_account;
};

struct Options {
  std::string volume;                  // named volume ("" for inline)
  std::string pool;                    // its pool, when the PV says (option `pool`)
  std::optional<InlineSpec> inline_spec;
  bool read_only = false;
  std::vector<std::string> mount_options;
  std::optional<uint32_t> fs_group;
  PodInfo pod;
};

// Parses the options of a `mount` call. Returns false with a message for a
// person (naming the key at fault) when they are unusable.
bool ParseMountOptions(std::string_view json, Options* out, std::string* error);

// The volume an `expandfs` call is about: option `volume`.
bool ParseVolumeName(std::string_view json, std::string* volume, std::string* error);

}  // namespace nodevol::flex
