// Tables and "Key: value" blocks: every cell and value escaped, columns
// aligned on what the terminal shows.
#include "output.h"

#include <gtest/gtest.h>

#include <sstream>

namespace nodevol::ctl {
namespace {

TEST(Output, TableEscapesEveryCellAndAlignsTheEscapedText) {
  Table t({"NAME", "TARGET"});
  t.Add({"v\x1b[2J", "/a\nfake-row  x"});
  t.Add({"v2", "/b\xc2\x9b"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "NAME      TARGET\n"
            "v\\x1b[2J  /a\\x0afake-row  x\n"
            "v2        /b\\xc2\\x9b\n");
}

TEST(Output, FieldsEscapeKeysAndValues) {
  std::ostringstream out;
  PrintFields(out, {{"Name", "v1"}, {"Parameters", "nodevol.io/pvc-name=x\x1b]2;t\x07"}, {"K\x7f", ""}});
  EXPECT_EQ(out.str(),
            "Name:        v1\n"
            "Parameters:  nodevol.io/pvc-name=x\\x1b]2;t\\x07\n"
            "K\\x7f:       -\n");
}

}  // namespace
}  // namespace nodevol::ctl
