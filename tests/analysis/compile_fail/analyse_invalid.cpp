// build error: (check_failed::deadlock\(int, int\)|non-constexpr function 'deadlock')
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <algorithm>
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  std::rotate(t.programs[0].begin() + 3, t.programs[0].begin() + 4, t.programs[0].begin() + 8);
  return t;
}();
constexpr auto figures = ctpipe::analyse(bad);
