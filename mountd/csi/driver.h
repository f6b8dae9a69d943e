// The CSI driver nodevold is, as Kubernetes names it: the CSIDriver
// object, the provisioner's spec.csi PVs (driver) and kubelet's plugin
// registration must all say the same.
#pragma once

namespace nodevol::csi {

inline constexpr char kDriverName[] = "nodevol.io";

}  // namespace nodevol::csi
