// build error: ctpipe executor: a tensor that crosses a stage boundary must be trivially copyable \(it is sent as bytes\)
// build error: executor_requirements<ctpipe::mpi::detail::executor_tag
// build output under: 16384 bytes
#include <vector>

#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>
// A host tensor that owns heap memory: a host executor copies it, but MPI cannot send it as bytes.
struct owning {
  std::vector<float> v = std::vector<float>(4);
};
struct to_owning {
  using input_type = ctpipe::layers::matrix<2, 2>;
  using output_type = owning;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) { y.v.assign(x.v.begin(), x.v.end()); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) {
    std::copy(dy.v.begin(), dy.v.end(), dx.v.begin());
  }
};
struct from_owning {
  using input_type = owning;
  using output_type = ctpipe::layers::matrix<2, 2>;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) { std::copy(x.v.begin(), x.v.end(), y.v.begin()); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) {
    dx.v.assign(dy.v.begin(), dy.v.end());
  }
};
using net = ctpipe::model<to_owning, from_owning>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 2>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using exec = ctpipe::mpi::executor<table, net, ctpipe::partition<net, 2>(), loss>;
static_assert(exec::ranks == 2);
