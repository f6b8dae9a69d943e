// Base64 as the Kubernetes API writes []byte fields in JSON (standard
// alphabet, padded): kubeconfig's *-data, a CSR's request and certificate,
// a Secret's data.
#pragma once

#include <string>

namespace nodevol::kube {

// False on a character outside the alphabet or data after the padding.
// Whitespace is skipped, as in kubeconfig files that wrap the text.
bool DecodeBase64(const std::string& in, std::string* out);
std::string EncodeBase64(const std::string& in);

}  // namespace nodevol::kube
