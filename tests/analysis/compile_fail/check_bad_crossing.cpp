// build error: ctpipe::check: the crossings a table lists must each join two stages of a chain at least two apart
// build error: table_check_failed<.*bad_crossing, -1, 0,
#include <ctpipe/ctpipe.hpp>

#include <array>
// Stages 0 and 1 are neighbours: what 0 makes for 1 travels in their own message, not a skip message.
constexpr std::array<ctpipe::crossing, 1> neighbours{{{.from = 0, .to = 1, .bytes = 64}}};
constexpr auto bad = ctpipe::make_table<ctpipe::one_f_one_b(4, 2), neighbours>();
static_assert(ctpipe::check<bad>());
