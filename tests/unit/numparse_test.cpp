// core/numparse.hpp: the one integer parser behind GOSHIM_MAXPROCS and
// GOSHIM_DEBUG's millisecond settings and the launcher's --procs and
// --schedtrace; what it accepts and refuses.
#include <criterion/criterion.h>

#include "core/numparse.hpp"

using namespace goshim;

Test(numparse, procs_accepts) {
  struct {
    const char* s;
    int v;
  } ok[] = {{"1", 1}, {"2", 2}, {"02", 2}, {"64", 64}, {"1024", 1024}};
  for (auto& c : ok) {
    int v = 0;
    cr_expect(parse_procs(c.s, &v), "'%s' refused", c.s);
    cr_expect_eq(v, c.v, "'%s' -> %d", c.s, v);
  }
}

Test(numparse, procs_refuses) {
  // 4294967297 is what atoi wrapped to 1; " 2" what strtol took.
  const char* bad[] = {"",   "0",  "1025", "4294967297", "99999999999999999999", "-1", "+2", " 2",
                       "2 ", "2k", "0x10", "1.5",        "zero",                 "2,3"};
  for (const char* s : bad) {
    int v = 7;
    cr_expect(!parse_procs(s, &v), "'%s' accepted", s);
    cr_expect_eq(v, 7, "'%s' wrote the output", s);
  }
  int v;
  cr_expect(!parse_procs(nullptr, &v));
}

Test(numparse, schedtrace_range) {
  int v = 0;
  cr_expect(parse_schedtrace_ms("1", &v));
  cr_expect_eq(v, 1);
  cr_expect(parse_schedtrace_ms("3600000", &v));
  cr_expect_eq(v, 3600000);
  const char* bad[] = {"", "0", "3600001", "4000000", "4294967297", "-20", "+20", " 20", "20ms", "20 "};
  for (const char* s : bad) {
    v = 7;
    cr_expect(!parse_schedtrace_ms(s, &v), "'%s' accepted", s);
    cr_expect_eq(v, 7, "'%s' wrote the output", s);
  }
}

Test(numparse, int_bounds_and_errno) {
  long v = 0;
  cr_expect(parse_int("0", 0, 1, &v));
  cr_expect_eq(v, 0);
  cr_expect(!parse_int("2", 0, 1, &v));
  cr_expect(parse_int("9223372036854775807", 0, 9223372036854775807L, &v));
  cr_expect(!parse_int("9223372036854775808", 0, 9223372036854775807L, &v));
  errno = 5;
  cr_expect(!parse_int("99999999999999999999", 0, 10, &v));
  cr_expect_eq(errno, 5, "errno kept");
}
