#include <ctpipe/ctpipe.hpp>
int odr_b_makespan() { return static_cast<int>(ctpipe::analyse(ctpipe::generate(ctpipe::gpipe(2, 2))).makespan); }
