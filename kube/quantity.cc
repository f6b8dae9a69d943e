#include "kube/quantity.h"

#include <array>
#include <charconv>
#include <limits>
#include <utility>

namespace nodevol::kube {
namespace {

struct Suffix {
  std::string_view name;
  Quantity::Format format;
  int exponent;  // of 10 for decimal, of 2 for binary
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"n", Quantity::Format::kDecimalSI, -9},
    {"u", Quantity::Format::kDecimalSI, -6},
    {"m", Quantity::Format::kDecimalSI, -3},
    {"", Quantity::Format::kDecimalSI, 0},
    {"k", Quantity::Format::kDecimalSI, 3},
    {"M", Quantity::Format::kDecimalSI, 6},
    {"G", Quantity::Format::kDecimalSI, 9},
    {"T", Quantity::Format::kDecimalSI, 12},
    {"P", Quantity::Format::kDecimalSI, 15},
    {"E", Quantity::Format::kDecimalSI, 18},
    {"Ki", Quantity::Format::kBinarySI, 10},
    {"Mi", Quantity::Format::kBinarySI, 20},
    {"Gi", Quantity::Format::kBinarySI, 30},
    {"Ti", Quantity::Format::kBinarySI, 40},
    {"Pi", Quantity::Format::kBinarySI, 50},
    {"Ei", Quantity::Format::kBinarySI, 60},
}};

constexpr std::string_view kMaxBinary = "9223372036854775807";  // 2^63-1
constexpr std::string_view kSuffixLetters = "eEinumkKMGTP";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status Invalid(std::string_view text, std::string_view why) {
  return Status::InvalidArgument("quantity \"" + std::string(text) + "\": " + std::string(why) +
                                 " (expected e.g. 10Gi, 500M, 1.5, 1e9)");
}

// digits *= factor, for a decimal digit string.
void MultiplySmall(std::string& digits, uint32_t factor) {
  uint64_t carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    uint64_t v = static_cast<uint64_t>(*it - '0') * factor + carry;
    *it = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  while (carry > 0) {
    digits.insert(digits.begin(), static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
}

// digits += 1.
void Increment(std::string& digits) {
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (*it != '9') {
      ++*it;
      return;
    }
    *it = '0';
  }
  digits.insert(digits.begin(), '1');
}

// Puts (digits, exponent) in the form the class keeps: no leading zeros,
// trailing zeros moved into the exponent, zero as ("0", 0).
void Normalize(std::string& digits, int64_t& exponent) {
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    digits = "0";
    exponent = 0;
    return;
  }
  digits.erase(0, first);
  size_t last = digits.find_last_not_of('0');
  exponent += static_cast<int64_t>(digits.size() - 1 - last);
  digits.resize(last + 1);
}

// Compares |a| and |b|, both normalized.
int CompareMagnitude(const std::string& a_digits, int64_t a_exp, const std::string& b_digits, int64_t b_exp) {
  bool a_zero = a_digits == "0", b_zero = b_digits == "0";
  if (a_zero || b_zero) return a_zero == b_zero ? 0 : (a_zero ? -1 : 1);
  // Position of the most significant digit decides first.
  int64_t a_top = static_cast<int64_t>(a_digits.size()) + a_exp;
  int64_t b_top = static_cast<int64_t>(b_digits.size()) + b_exp;
  if (a_top != b_top) return a_top < b_top ? -1 : 1;
  // Same magnitude: compare digit by digit, a missing digit being 0.
  size_t n = std::max(a_digits.size(), b_digits.size());
  for (size_t i = 0; i < n; ++i) {
    char x = i < a_digits.size() ? a_digits[i] : '0';
    char y = i < b_digits.size() ? b_digits[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// The suffix part: letters, then an optional sign and digits (the
// apiserver's scanner); returns false if anything else follows.
bool ScanSuffix(std::string_view rest) {
  size_t i = 0;
  while (i < rest.size() && kSuffixLetters.find(rest[i]) != std::string_view::npos) ++i;
  if (i < rest.size() && (rest[i] == '+' || rest[i] == '-')) ++i;
  while (i < rest.size() && IsDigit(rest[i])) ++i;
  return i == rest.size();
}

}  // namespace

Status Quantity::Parse(std::string_view text, Quantity* out) {
  if (text.empty()) return Invalid(text, "empty");
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  size_t num_begin = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  std::string_view num = text.substr(num_begin, pos - num_begin);
  std::string_view denom;
  bool has_point = pos < text.size() && text[pos] == '.';
  if (has_point) {
    size_t denom_begin = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    denom = text.substr(denom_begin, pos - denom_begin);
  }
  if (num.empty() && !has_point) return Invalid(text, "no number");
  std::string_view suffix = text.substr(pos);
  if (!ScanSuffix(suffix)) return Invalid(text, "malformed");

  Format format = Format::kDecimalExponent;
  int64_t exp10 = 0;
  int exp2 = 0;
  bool known = false;
  for (const Suffix& s : kSuffixes) {
    if (s.name != suffix) continue;
    format = s.format;
    if (format == Format::kBinarySI) {
      exp2 = s.exponent;
    } else {
      exp10 = s.exponent;
    }
    known = true;
    break;
  }
  if (!known) {
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) {
      return Invalid(text, "unknown suffix \"" + std::string(suffix) + "\"");
    }
    std::string_view number = suffix.substr(1);
    if (number[0] == '+') number.remove_prefix(1);
    int32_t e = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), e);
    // Kubernetes reads the exponent as int64 and truncates it to int32;
    // refusing what does not fit is the only safe reading of such input.
    if (ec != std::errc() || end != number.data() + number.size()) {
      return Invalid(text, "bad exponent \"" + std::string(suffix) + "\"");
    }
    format = Format::kDecimalExponent;
    exp10 = e;
  }

  Quantity q;
  q.format_ = format;
  q.negative_ = negative;
  q.digits_ = std::string(num) + std::string(denom);
  if (q.digits_.empty()) q.digits_ = "0";
  q.exponent_ = exp10 - static_cast<int64_t>(denom.size());
  for (int i = 0; i < exp2; i += 10) MultiplySmall(q.digits_, 1024);
  Normalize(q.digits_, q.exponent_);

  if (!q.zero() && q.exponent_ < -9) {
    // Nothing finer than 1n: round the magnitude up (it has a non-zero
    // last digit, so whatever is cut off is never zero).
    uint64_t cut = static_cast<uint64_t>(-9 - q.exponent_);
    if (q.digits_.size() <= cut) {
      q.digits_ = "1";
    } else {
      q.digits_.resize(q.digits_.size() - cut);
      Increment(q.digits_);
    }
    q.exponent_ = -9;
    Normalize(q.digits_, q.exponent_);
  }
  if (q.format_ == Format::kBinarySI) {
    if (CompareMagnitude(q.digits_, q.exponent_, std::string(kMaxBinary), 0) > 0) {
      q.digits_ = std::string(kMaxBinary);
      q.exponent_ = 0;
    }
    // 0 < |v| < 1: Kubernetes switches such a value to DecimalSI.
    if (!q.zero() && q.exponent_ < 0 && static_cast<int64_t>(q.digits_.size()) <= -q.exponent_) {
      q.format_ = Format::kDecimalSI;
    }
  }
  if (q.zero()) q.negative_ = false;
  *out = std::move(q);
  return Status::Ok();
}

Quantity Quantity::FromBytes(uint64_t bytes) {
  Quantity q;
  q.digits_ = std::to_string(bytes);
  q.exponent_ = 0;
  Normalize(q.digits_, q.exponent_);
  q.format_ = bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? Format::kDecimalSI
                                                                                  : Format::kBinarySI;
  return q;
}

Status Quantity::ToBytes(uint64_t* out) const {
  if (zero()) {
    *out = 0;
    return Status::Ok();
  }
  if (negative_) return Status::InvalidArgument("quantity " + ToString() + " is negative, not a byte count");
  Status too_big = Status::InvalidArgument("quantity " + ToString() + " is more than 2^64-1 bytes");
  std::string whole;
  bool fraction = false;
  if (exponent_ >= 0) {
    if (static_cast<int64_t>(digits_.size()) + exponent_ > 20) return too_big;
    whole = digits_ + std::string(static_cast<size_t>(exponent_), '0');
  } else {
    int64_t keep = static_cast<int64_t>(digits_.size()) + exponent_;
    whole = keep > 0 ? digits_.substr(0, static_cast<size_t>(keep)) : "0";
    fraction = true;  // normalized: the last digit, which is cut, is not 0
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), value);
  if (ec != std::errc()) return too_big;
  if (fraction) {
    if (value == std::numeric_limits<uint64_t>::max()) return too_big;
    ++value;
  }
  *out = value;
  return Status::Ok();
}

int Quantity::Compare(const Quantity& other) const {
  if (negative_ != other.negative_) return negative_ ? -1 : 1;
  int c = CompareMagnitude(digits_, exponent_, other.digits_, other.exponent_);
  return negative_ ? -c : c;
}

std::string Quantity::ToString() const {
  if (zero()) return "0";
  std::string out = negative_ ? "-" : "";
  Format format = format_;
  if (format == Format::kBinarySI) {
    // Whole and at least 1024 (binary values are capped at 2^63-1, so the
    // digits fit); otherwise Kubernetes falls back to DecimalSI.
    uint64_t value = 0;
    bool whole = exponent_ >= 0 && static_cast<int64_t>(digits_.size()) + exponent_ <= 19;
    if (whole) {
      std::string s = digits_ + std::string(static_cast<size_t>(exponent_), '0');
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
      whole = ec == std::errc();
    }
    if (whole && value >= 1024) {
      static constexpr std::array<std::string_view, 7> kBinary{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
      size_t power = 0;
      while (value % 1024 == 0 && power + 1 < kBinary.size()) {
        value /= 1024;
        ++power;
      }
      return out + std::to_string(value) + std::string(kBinary[power]);
    }
    format = Format::kDecimalSI;
  }
  // Decimal: the exponent goes down to a multiple of 3, padding the digits.
  std::string digits = digits_;
  int64_t exponent = exponent_;
  while (exponent % 3 != 0) {
    digits.push_back('0');
    --exponent;
  }
  out += digits;
  if (format == Format::kDecimalSI && exponent >= -9 && exponent <= 18) {
    for (const Suffix& s : kSuffixes) {
      if (s.format == Format::kDecimalSI && s.exponent == exponent) return out + std::string(s.name);
    }
  }
  // DecimalExponent, or DecimalSI beyond "E" (Kubernetes switches to e<n>
  // rather than lose the magnitude).
  if (exponent != 0) out += "e" + std::to_string(exponent);
  return out;
}

std::string FormatBinaryBytes(uint64_t bytes) { return Quantity::FromBytes(bytes).ToString(); }

}  // namespace nodevol::kube
