// Kubernetes resource.Quantity (k8s.io/apimachinery/pkg/api/resource): the
// "10Gi" / "500M" / "1e9" strings of PVC requests and PV capacities.
//
// Parse accepts what the apiserver accepts: a signed decimal number
// (digits, digits.digits, digits., .digits) followed by a binary suffix
// (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E) or a decimal
// exponent (e<n> / E<n>). The value is exact (no floating point); like
// Kubernetes it keeps nothing finer than 1n (finer non-zero values round
// away from zero) and silently caps binary-suffixed values at 2^63-1.
//
// ToString is Kubernetes' canonical form (CanonicalizeBytes): same format as
// the input, largest suffix that loses nothing, no fraction:
// "1024Mi" -> "1Gi", "1.5Gi" -> "1536Mi", "1000M" -> "1G", "1.5" -> "1500m",
// "1e3" -> "1e3"; a binary value below 1024 or with a fraction prints as
// decimal ("0.5Ki" -> "512"). (The apiserver also echoes a few spellings it
// already finds canonical verbatim, such as "+1Ki"; this always canonicalizes.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace nodevol::kube {

class Quantity {
 public:
  enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

  // Zero, DecimalSI.
  Quantity() = default;

  // Parses `text`; INVALID_ARGUMENT with the reason if it is not a quantity.
  static Status Parse(std::string_view text, Quantity* out);

  // A whole number of bytes: BinarySI, or DecimalSI beyond 2^63-1 (where
  // Kubernetes would cap a BinarySI value).
  static Quantity FromBytes(uint64_t bytes);

  Format format() const { return format_; }
  bool negative() const { return negative_; }
  bool zero() const { return digits_ == "0"; }

  // The value rounded up to a whole number of bytes ("0.5" -> 1,
  // "1.5Ki" -> 1536). INVALID_ARGUMENT for a negative value or one beyond
  // 2^64-1 bytes.
  Status ToBytes(uint64_t* out) const;

  // -1, 0 or 1 as this is less than, equal to or greater than `other`.
  int Compare(const Quantity& other) const;

  // The canonical string, as the apiserver prints it.
  std::string ToString() const;

 private:
  // value = (negative ? -1 : 1) * digits_ * 10^exponent_, digits_ without
  // leading zeros and, unless the value is 0, without trailing zeros.
  bool negative_ = false;
  std::string digits_ = "0";
  int64_t exponent_ = 0;
  Format format_ = Format::kDecimalSI;
};

// Writes a byte count the way a PV capacity should carry it, which is also
// exactly how the apiserver will print it back: the largest binary suffix
// that divides it ("1Gi", "1536Mi", "1536" for 1.5Ki). Kubernetes prints
// binary values below 1024 in decimal SI ("1k" for 1000), and counts beyond
// 2^63-1 come out as plain digits because a binary suffix would be capped.
std::string FormatBinaryBytes(uint64_t bytes);

}  // namespace nodevol::kube
