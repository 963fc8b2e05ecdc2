// build error: a stage plan that starts past layer 0 \(a frozen prefix: freeze_partition\) runs on the executors of host layers only
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/layers/dense.hpp>
using l = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<l, l, l, l>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
constexpr auto plan = ctpipe::make_execution_plan<table>();
constexpr auto stages = ctpipe::freeze_partition<net, 2>(1);
static_assert(ctpipe::detail::executor_requirements<ctpipe::detail::executor_kind::cuda, table, net, stages, 2,
                                                    ctpipe::detail::backward_in_order(plan)>::value);
