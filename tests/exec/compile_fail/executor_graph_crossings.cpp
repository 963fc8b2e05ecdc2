// build error: ctpipe executor: the table's crossings must be the model's under the stage plan: build the table with make_table<schedule, ctpipe::model_crossings<Model, Stages>\(\)>\(\) \(a table without them has no skip messages for the tensors that skip stages\)
// build output under: 16384 bytes
// A residual around layer 1, a stage each for layers 0 and 1: layer 0's output skips stage 1, but
// the table was made without the model's crossings.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 32>;
constexpr auto stages = ctpipe::stage_bounds<net, 0, 1, 2, 4>();
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(3, 1)>();
using exec = ctpipe::host_executor<table, net, stages, loss>;
static_assert(exec::ranks == 3);
