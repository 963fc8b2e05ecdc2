// Quickstart: the four schedules for 4 ranks and 8 microbatches, built, proved and measured at
// compile time, then printed side by side from the same constexpr code at run time.
// (Training a model through them arrives with the host executor.)
#include <ctpipe/ctpipe.hpp>

#include <iostream>

namespace {

// Costs per stage: a backward costs twice a forward. Interleaved chunks each hold half a stage.
constexpr ctpipe::cost_model costs{.forward = 1.0, .backward = 2.0};
constexpr ctpipe::cost_model chunk_costs{.forward = 0.5, .backward = 1.0};

constexpr auto naive = ctpipe::make_table<ctpipe::naive(4, 8)>();
constexpr auto gpipe = ctpipe::make_table<ctpipe::gpipe(4, 8)>();
constexpr auto one_f_one_b = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
constexpr auto interleaved = ctpipe::make_table<ctpipe::interleaved(4, 8, 2)>();

// A table that breaks a rule does not compile: the error names the rule, the rank and the position.
static_assert(ctpipe::check<naive>());
static_assert(ctpipe::check<gpipe>());
static_assert(ctpipe::check<one_f_one_b>());
static_assert(ctpipe::check<interleaved>());

// Figures, proved before the program exists.
constexpr auto r_1f1b = ctpipe::analyse(one_f_one_b, costs);
constexpr auto r_gpipe = ctpipe::analyse(gpipe, costs);
constexpr auto r_inter = ctpipe::analyse(interleaved, chunk_costs);
static_assert(r_1f1b.makespan == r_gpipe.makespan, "1F1B keeps GPipe's makespan...");
static_assert(r_1f1b.peak_live[0] == 4 && r_gpipe.peak_live[0] == 8, "...with half the activations on rank 0");
static_assert(r_inter.makespan < r_1f1b.makespan, "interleaving shrinks the bubble");
static_assert(r_inter.bubble_fraction < 0.16);

template <class Table>
void show(const char* title, const Table& t, const ctpipe::cost_model& c) {
  const auto rep = ctpipe::analyse(t, c);
  std::cout << "== " << title << "\n" << ctpipe::timeline_grid(t, c) << ctpipe::figures_text(rep) << "\n";
}

}  // namespace

int main() {
  show("naive model parallel (p=4, m=8; F=1, B=2)", naive, costs);
  show("GPipe (p=4, m=8; F=1, B=2)", gpipe, costs);
  show("1F1B (p=4, m=8; F=1, B=2)", one_f_one_b, costs);
  show("interleaved 1F1B (p=4, m=8, v=2; per chunk F=0.5, B=1)", interleaved, chunk_costs);
  std::cout << "schedule      makespan  bubble  peak live (rank 0..3)\n";
  auto row = [](const char* name, const auto& r) {
    std::cout << name << ctpipe::format_number(r.makespan) << "    " << ctpipe::format_number(r.bubble_fraction) << "  ";
    for (int x : r.peak_live) std::cout << " " << x;
    std::cout << "\n";
  };
  row("naive         ", ctpipe::analyse(naive, costs));
  row("gpipe         ", r_gpipe);
  row("1f1b          ", r_1f1b);
  row("interleaved   ", r_inter);
}
