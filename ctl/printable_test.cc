// Printable: what reaches the operator's terminal from nodevold's strings.
#include "printable.h"

#include <gtest/gtest.h>

namespace nodevol::ctl {
namespace {

TEST(Printable, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(Printable("pvc-1 /var/lib/kubelet/pods/x"), "pvc-1 /var/lib/kubelet/pods/x");
  EXPECT_EQ(Printable("équipe \u00a0 \u4f60\u597d \U0001f600"), "équipe \u00a0 \u4f60\u597d \U0001f600");
}

TEST(Printable, EscapesC0AndDel) {
  EXPECT_EQ(Printable("a\x1b]2;owned\x07z"), "a\\x1b]2;owned\\x07z");
  EXPECT_EQ(Printable("line\nfake row\ttab\r"), "line\\x0afake row\\x09tab\\x0d");
  EXPECT_EQ(Printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(Printable("del\x7f"), "del\\x7f");
}

TEST(Printable, EscapesC1EncodedOrRaw) {
  // U+009B (CSI) as UTF-8 passes many checks that only look for bytes < 0x20.
  EXPECT_EQ(Printable("x\xc2\x9b" "31mred"), "x\\xc2\\x9b31mred");
  EXPECT_EQ(Printable("x\xc2\x80y"), "x\\xc2\\x80y");
  EXPECT_EQ(Printable("x\x9b" "31m"), "x\\x9b31m");  // a lone C1 byte is invalid UTF-8
}

TEST(Printable, EscapesInvalidUtf8AndBackslash) {
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");              // overlong "/"
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");     // a surrogate
  EXPECT_EQ(Printable("\xe4\xbd"), "\\xe4\\xbd");              // cut short
  EXPECT_EQ(Printable("a\\x1b"), "a\\\\x1b");                  // cannot pose as an escape
}

}  // namespace
}  // namespace nodevol::ctl
