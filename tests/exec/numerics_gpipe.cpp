// gpipe at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run.
#include "support/numerics.hpp"

CTPIPE_NUMERICS_TESTS(gpipe)

// dispatch::automatic (the default) unrolls programs of up to automatic_unroll_limit tasks a rank
// and walks longer ones.
namespace {
using small_exec = ctpipe::host_executor<ctpipe::make_table<ctpipe::gpipe(2, 8)>(), test::mlp,
                                         ctpipe::partition<test::mlp, 2>(), test::loss>;
static_assert(small_exec::dispatch_strategy == ctpipe::dispatch::unrolled);
using limit_exec = ctpipe::host_executor<ctpipe::make_table<ctpipe::gpipe(1, ctpipe::automatic_unroll_limit / 2)>(),
                                         test::mlp, ctpipe::partition<test::mlp, 1>(), test::loss>;
static_assert(limit_exec::dispatch_strategy == ctpipe::dispatch::unrolled);
using long_exec = ctpipe::host_executor<ctpipe::make_table<ctpipe::gpipe(1, ctpipe::automatic_unroll_limit / 2 + 1)>(),
                                        test::mlp, ctpipe::partition<test::mlp, 1>(), test::loss>;
static_assert(long_exec::dispatch_strategy == ctpipe::dispatch::table_walk);
using forced = ctpipe::host_executor<ctpipe::make_table<ctpipe::gpipe(2, 8)>(), test::mlp,
                                     ctpipe::partition<test::mlp, 2>(), test::loss, ctpipe::dispatch::table_walk>;
static_assert(forced::dispatch_strategy == ctpipe::dispatch::table_walk);
}  // namespace
