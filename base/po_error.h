// PoErrorText: the message of a boost::program_options error, safe to ask.
//
// error_with_option_name::what() replaces placeholders such as
// "%canonical_option%" in a loop until none is left, so an option name,
// token or value that holds one (a typo in a config file, an argument)
// makes it loop forever (found by tests/fuzz on nodevol-flex's config).
// '%' in what is substituted becomes '?' first. Header-only: only the
// programs that parse options include it.
#pragma once

#include <string>

#include <boost/program_options/errors.hpp>

namespace nodevol {

namespace po_error_detail {
struct Cleaned : boost::program_options::error_with_option_name {
  explicit Cleaned(const boost::program_options::error_with_option_name& e)
      : boost::program_options::error_with_option_name(e) {
    for (auto& [key, value] : m_substitutions) Clean(value);
    for (auto& [key, value] : m_substitution_defaults) Clean(value.first), Clean(value.second);
  }
  static void Clean(std::string& s) {
    for (char& c : s)
      if (c == '%') c = '?';
  }
};
}  // namespace po_error_detail

inline std::string PoErrorText(const boost::program_options::error& e) {
  if (const auto* named = dynamic_cast<const boost::program_options::error_with_option_name*>(&e))
    return po_error_detail::Cleaned(*named).what();
  return e.what();
}

}  // namespace nodevol
