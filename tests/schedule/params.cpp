// Bad parameters at run time: an exception whose message names the schedule, the parameter, its
// value and the rule (the same words as the compile-time errors in compile_fail/).
#include <doctest/doctest.h>

#include <ctpipe/ctpipe.hpp>

#include <string>

namespace {
std::string error_of(const ctpipe::schedule_generator auto& s) {
  try {
    (void)ctpipe::generate(s);
  } catch (const ctpipe::schedule_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("each parameter rule has its run-time error") {
  CHECK(error_of(ctpipe::one_f_one_b(0, 8)) == "ctpipe::one_f_one_b: ranks (0) must be at least 1");
  CHECK(error_of(ctpipe::gpipe(4, -1)) == "ctpipe::gpipe: microbatches (-1) must be at least 1");
  CHECK(error_of(ctpipe::interleaved(4, 8, 0)) == "ctpipe::interleaved: chunks (0) must be at least 1");
  CHECK(error_of(ctpipe::interleaved(4, 8, 2, 3)) == "ctpipe::interleaved: group (3) must be at least ranks (4)");
  CHECK(error_of(ctpipe::interleaved(4, 8, 2, 9)) == "ctpipe::interleaved: group (9) must be at most microbatches (8)");
  CHECK(error_of(ctpipe::interleaved(4, 10, 2)) ==
        "ctpipe::interleaved: group (4) must leave a remainder microbatches mod group (2) that is 0 or at least ranks "
        "(4), or the schedule deadlocks");
  CHECK(error_of(ctpipe::pipedream(4, 2)) ==
        "ctpipe::pipedream: microbatches (2) must be at least ranks - 1 (3), so that a step holds the pipeline's "
        "warm-up");
  CHECK(error_of(ctpipe::interleaved(4, 3, 2, 4)) ==
        "ctpipe::interleaved: group (4) must equal microbatches (3) when there are fewer microbatches than ranks (4)");
  CHECK(error_of(ctpipe::looped_bfs(2, 2, 0)) == "ctpipe::looped_bfs: chunks (0) must be at least 1");
  CHECK(error_of(ctpipe::zb_h1(0, 2)) == "ctpipe::zb_h1: ranks (0) must be at least 1");
  CHECK(error_of(ctpipe::zb_h2(2, 0)) == "ctpipe::zb_h2: microbatches (0) must be at least 1");
  CHECK(error_of(ctpipe::zb_v(0, 2)) == "ctpipe::zb_v: ranks (0) must be at least 1");
  CHECK(error_of(ctpipe::v_min(0, 2)) == "ctpipe::v_min: ranks (0) must be at least 1");
  CHECK(error_of(ctpipe::v_half(2, 0)) == "ctpipe::v_half: microbatches (0) must be at least 1");
  CHECK(error_of(ctpipe::synthesise(40, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 4)) ==
        "ctpipe::synthesise: ranks (40) must be at most 32 for synthesis (its per-stage costs), 16 on V placement "
        "(two stages a rank)");
  CHECK(error_of(ctpipe::synthesise(17, 40, ctpipe::synthesis_costs::uniform(1, 1, 1), 40,
                                    ctpipe::synthesis_placement::v)) ==
        "ctpipe::synthesise: ranks (17) must be at most 32 for synthesis (its per-stage costs), 16 on V placement "
        "(two stages a rank)");
  CHECK(error_of(
            ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 1, ctpipe::synthesis_placement::v)) ==
        "ctpipe::synthesise: memory_limit (1) must be at least two microbatches' activations of a stage (2 * "
        "costs.activation) on V placement, where the last rank holds both its stages' for a microbatch");
  // V-Min needs 2 * ((4 + 4) / 3) = 4, the heuristic 8: a limit of 3 has no order.
  CHECK(error_of(
            ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 3, ctpipe::synthesis_placement::v)) ==
        "ctpipe::synthesise: memory_limit (3) leaves synthesis no order: on V placement its heuristic needs 2 * ranks "
        "(8) activations of a stage or more and microbatches >= ranks, V-Min 2 * ((ranks + 4) / 3)");
  CHECK(error_of(ctpipe::synthesise_heuristic(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 7,
                                              ctpipe::synthesis_placement::v)) ==
        "ctpipe::synthesise: memory_limit (7) leaves synthesis no order: on V placement its heuristic needs 2 * ranks "
        "(8) activations of a stage or more and microbatches >= ranks, V-Min 2 * ((ranks + 4) / 3)");
  CHECK(error_of(ctpipe::synthesise(2, 8, ctpipe::synthesis_costs::uniform(1, 0, 1), 4)) ==
        "ctpipe::synthesise: costs (0) must be at least 1 for every stage's F, I and W, and at least 0 for comm");
  CHECK(error_of(ctpipe::synthesise(2, 8, ctpipe::synthesis_costs::uniform(1, 1, 1).with_memory(3, 4), 12)) ==
        "ctpipe::synthesise: costs (4) must leave costs.activation at least 1 and costs.weight_stash from 0 to "
        "costs.activation");
  CHECK(error_of(ctpipe::synthesise(2, 8, ctpipe::synthesis_costs::uniform(1, 1, 1).with_memory(3, 1), 2)) ==
        "ctpipe::synthesise: memory_limit (2) must be at least one microbatch's activations of a rank's stage "
        "(costs.activation, 1 by default)");
  CHECK(error_of(ctpipe::interleaved_zero_bubble(4, 9, 2)) ==
        "ctpipe::interleaved_zero_bubble: microbatches (9) must be a multiple of the rounds, microbatches / ranks (2), "
        "as in PyTorch");
  CHECK(error_of(ctpipe::interleaved_zero_bubble(0, 8, 2)) ==
        "ctpipe::interleaved_zero_bubble: ranks (0) must be at least 1");
  CHECK(error_of(ctpipe::interleaved_zero_bubble(4, 8, -1)) ==
        "ctpipe::interleaved_zero_bubble: chunks (-1) must be at least 1");
  CHECK(error_of(ctpipe::dualpipe_v(4, 7)) == "ctpipe::dualpipe_v: microbatches (7) must be at least 2 * ranks (8)");
  CHECK(error_of(ctpipe::dualpipe(3, 12)) ==
        "ctpipe::dualpipe: ranks (3) must be even (each rank holds a stage of both directions)");
  CHECK(error_of(ctpipe::dualpipe(4, 9)) ==
        "ctpipe::dualpipe: microbatches (9) must be even (half of them enter at each end)");
  CHECK(error_of(ctpipe::dualpipe(4, 6)) == "ctpipe::dualpipe: microbatches (6) must be at least 2 * ranks (8)");
  CHECK(
      error_of(ctpipe::interleaved(1 << 11, 4, 1 << 10)) ==
      "ctpipe::interleaved: ranks, chunks and microbatches (1024) are too large (each must stay below 2^20, and ranks * chunks too)");
}

TEST_CASE("Megatron's group rules: valid groups and remainders") {
  CHECK(ctpipe::validate(ctpipe::interleaved(4, 12, 2, 8)).ok());   // remainder 4 >= p
  CHECK(ctpipe::validate(ctpipe::interleaved(4, 12, 2, 6)).ok());   // multiple
  CHECK(!ctpipe::validate(ctpipe::interleaved(4, 11, 2, 8)).ok());  // remainder 3 < p
  CHECK(ctpipe::validate(ctpipe::interleaved(4, 3, 2)).ok());       // m < p: G = m by default
  CHECK(ctpipe::validate(ctpipe::interleaved(4, 3, 2, 3)).ok());
  CHECK(ctpipe::validate(ctpipe::interleaved(4, 12, 2, 8)).ok());
  CHECK(ctpipe::verify(ctpipe::generate(ctpipe::interleaved(4, 12, 2, 8))).ok());
}

TEST_CASE("schedule_error carries the parameters and the rule") {
  try {
    (void)ctpipe::generate_compute(ctpipe::interleaved(4, 10, 2));
    FAIL("expected an error");
  } catch (const ctpipe::schedule_error& e) {
    CHECK(e.rule() == ctpipe::param_rule::group_remainder);
    CHECK(e.params() == ctpipe::interleaved(4, 10, 2).info());
    CHECK(e.params().name.view() == "interleaved");
    CHECK(e.params().group == 4);
  }
}
