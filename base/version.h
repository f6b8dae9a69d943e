// Version: the nodevol release this binary was built from, e.g. "0.1.0".
// It lives in one generated file (version.cc, from version.cc.in), so a
// package rebuilt with another version (-DNODEVOL_VERSION=...) recompiles
// one file and relinks instead of rebuilding every target.
#pragma once

namespace nodevol {

const char* Version();

}  // namespace nodevol
