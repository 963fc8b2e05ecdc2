// What both elastic trainers (threads: ctpipe/elastic/trainer.hpp; processes over MPI:
// ctpipe/mpi/elastic.hpp) hold and answer alike: the model, the freeze point in use, and the record
// their freezing policy reads at each epoch's end.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ctpipe/elastic/plan.hpp>
#include <ctpipe/elastic/policy.hpp>  // freeze_record

namespace ctpipe::detail {

template <class ElasticPlan>
class trainer_state {
 public:
  using model_t = typename ElasticPlan::model_t;
  using input_type = typename model_t::input_type;
  static constexpr int microbatches = ElasticPlan::microbatches;
  static constexpr int layers = ElasticPlan::layers;
  static constexpr auto& points = ElasticPlan::points;

  /// Leading layers frozen now.
  int frozen() const noexcept { return points[current_].frozen; }
  /// The freeze point in use, and its index in ElasticPlan::points.
  const elastic_point& point() const noexcept { return points[current_]; }
  std::size_t point_index() const noexcept { return current_; }
  /// Epochs ended.
  int epoch() const noexcept { return record_.epoch(); }
  /// Steps run: the next step's number in its layers' context (ctpipe::context), whatever freeze
  /// point runs it.
  std::uint64_t steps() const noexcept { return steps_; }
  model_t& model() noexcept { return model_; }

 protected:
  explicit trainer_state(model_t& model) : model_(model) {}

  model_t& model_;
  std::size_t current_ = 0;
  freeze_record record_{layers};
  std::uint64_t steps_ = 0;
};

}  // namespace ctpipe::detail
