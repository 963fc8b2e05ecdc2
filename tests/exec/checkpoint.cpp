// Training resumed from a checkpoint is bitwise equal to training that never stopped, at another
// depth too: the sweeps' model (saved state, dropout, residuals across stages, a tied head,
// microbatches of mixed lengths) trained with clipped AdamW, checkpointed at step 10 of 20 by the
// host executor at p = 4 (1F1B), reloaded at p = 4, at p = 2 (ZB-V: four stages in a V) and into
// the sequential model, and trained on to step 20. The dropout masks of steps 10..19 come from the
// step origin the checkpoint keeps.
#include "support/numerics.hpp"

#include <ctpipe/optim/checkpoint.hpp>

#include <filesystem>
#include <string>

namespace {

using Model = test::block_mlp;
using Loss = test::loss_for<Model>;
using Input = Model::input_type;
using Opt = ctpipe::optimizer<Model, ctpipe::adamw>;
constexpr int m = test::microbatches;

constexpr auto four = ctpipe::one_f_one_b(4, m);
constexpr auto four_stages = test::even_stages<Model, four.stages()>();
using exec4 = ctpipe::host_executor<test::table_for<four, Model, four_stages>(), Model, four_stages, Loss,
                                    ctpipe::dispatch::table_walk>;
constexpr auto two = ctpipe::zb_v(2, m);
constexpr auto two_stages = test::even_stages<Model, two.stages()>();
using exec2 = ctpipe::host_executor<test::table_for<two, Model, two_stages>(), Model, two_stages, Loss,
                                    ctpipe::dispatch::table_walk>;

const auto data = test::make_data<Input>(m);

// Steps [from, to) of the run, through an executor, or sequentially where exec is null.

std::vector<float> state_of(Opt& opt) {
  std::vector<float> v;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          for (std::size_t t = 0; t < opt.tensors<K>().size(); ++t)
            for (std::size_t j = 0; j < 2; ++j)
              for (float x : opt.state<K>(t, j)) v.push_back(x);
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
  return v;
}

// Loads `file` into a fresh model and optimizer, trains steps 10..20 through Exec (or
// sequentially), and compares the end with the run that never stopped.
template <class Exec>
void resume(const std::string& file, Model& never_stopped, Opt& never_stopped_opt) {
  Model model = test::make_mlp<Model>(99);  // other weights: the checkpoint must replace them all
  Opt opt(model, test::sweep_rule, test::sweep_clip);
  const ctpipe::training_state s = ctpipe::load_checkpoint(file, opt);
  CHECK(s.origin.step == 10);
  CHECK(s.data == "sample 120");
  CHECK(opt.updates() == 10);
  if constexpr (std::is_same_v<Exec, void>) {
    test::train_steps<exec4>(nullptr, model, opt, data, 10, 20);
  } else {
    Loss l;
    Exec exec(model, l);
    exec.set_context_origin(s.origin);
    test::train_steps(&exec, model, opt, data, 10, 20);
  }
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(never_stopped)));
  CHECK(test::bitwise_equal(state_of(opt), state_of(never_stopped_opt)));
  CHECK(opt.updates() == 20);
}

}  // namespace

TEST_CASE("checkpoint at step 10 of 20 at p = 4, resumed at p = 4, at p = 2 and sequentially: bitwise the same run") {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("ctpipe_resume_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  Model model = test::make_mlp<Model>();
  Opt opt(model, test::sweep_rule, test::sweep_clip);
  Loss l;
  exec4 exec(model, l);
  test::train_steps(&exec, model, opt, data, 0, 10);
  ctpipe::save_checkpoint(file, opt, {exec.context_origin(), "sample 120"});
  test::train_steps(&exec, model, opt, data, 10, 20);  // the run that never stopped
  SUBCASE("p = 4") { resume<exec4>(file, model, opt); }
  SUBCASE("p = 2, another placement") { resume<exec2>(file, model, opt); }
  SUBCASE("sequentially") { resume<void>(file, model, opt); }
  std::filesystem::remove(file);
}
