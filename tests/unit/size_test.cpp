// core/size.hpp: the one size parser behind GOSHIM_STACK and the launcher's
// --stack; what it accepts and refuses.
#include <criterion/criterion.h>

#include "core/size.hpp"

using namespace goshim;

Test(size, accepts) {
  struct {
    const char* s;
    size_t v;
  } ok[] = {{"1", 1},
            {"123", 123},
            {"64k", 65536},
            {"64K", 65536},
            {"64kb", 65536},
            {"64KB", 65536},
            {"8m", 8u << 20},
            {"8M", 8u << 20},
            {"1g", 1ull << 30},
            {"100b", 100},
            {"1023g", 1023ull << 30},
            {"1024g", 1ull << 40}};
  for (auto& c : ok) {
    size_t v = 0;
    cr_expect(parse_size(c.s, &v), "'%s' refused", c.s);
    cr_expect_eq(v, c.v, "'%s' -> %zu", c.s, v);
  }
}

Test(size, refuses) {
  const char* bad[] = {"",    "k",     "0",   "0k",  "-1",  "+1",   " 1",    "1 ",   "1x",
                       "12q", "1kk",   "1mb2", "1.5m", "1025g", "1099511627777", "99999999999999999999",
                       "1t",  "0x10", "abc"};
  for (const char* s : bad) {
    size_t v = 7;
    cr_expect(!parse_size(s, &v), "'%s' accepted", s);
    cr_expect_eq(v, 7u, "'%s' wrote the output", s);
  }
  size_t v;
  cr_expect(!parse_size(nullptr, &v));
}

Test(size, stack_minimum) {
  size_t v = 0;
  cr_expect(parse_stack_size("16k", &v));
  cr_expect_eq(v, 16384u);
  cr_expect(!parse_stack_size("16383", &v));
  cr_expect(!parse_stack_size("8k", &v));
  cr_expect(parse_stack_size("256k", &v));
  cr_expect(!parse_stack_size("12q", &v));
}
