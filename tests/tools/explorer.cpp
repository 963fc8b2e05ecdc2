// The explorer in-process: output, exit codes, one-line errors.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "explorer.hpp"

namespace {
struct result {
  int rc;
  std::string out, err;
};
result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int rc = ctpipe::explorer::run(args, out, err);
  return {rc, out.str(), err.str()};
}
int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }
// A usage error: exit 2, one line on stderr that says `words`.
void expect_refused(const std::vector<std::string>& args, const std::string& words) {
  const auto r = run(args);
  CAPTURE(r.err);
  CHECK(r.rc == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find(words) != std::string::npos);
}
// Writes `text` to a file of the test's scratch folder (in the system's temporary directory, not
// wherever the test runs); returns its path.
std::string write(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "ctpipe_explorer_test_files";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}
}  // namespace

TEST_CASE("show: text, json, csv") {
  auto r = run({"show", "1f1b", "--ranks", "4", "--microbatches", "8", "--cost", "F=1,B=2"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("makespan 33.0") != std::string::npos);
  CHECK(r.out.find("bubble fraction 0.2727") != std::string::npos);
  CHECK(r.out.find("peak live activations per rank 4 3 2 1") != std::string::npos);
  r = run({"show", "interleaved", "-p", "4", "-m", "8", "-v", "2", "--cost", "F=0.5,B=1", "--format", "json"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("\"makespan\": 28.5") != std::string::npos);
  r = run({"show", "gpipe", "-p", "2", "-m", "2", "--format", "csv", "--compute-only"});
  CHECK(r.out == "0F0,0F1,,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n");
}

TEST_CASE("show: svg and trace, for every built-in schedule and for a table read back") {
  for (const char* name : {"1f1b", "zb_h2", "zb_v", "dualpipe_v", "dualpipe"}) {
    CAPTURE(name);
    auto r = run({"show", name, "-p", "4", "-m", "8", "--format", "svg"});
    CHECK(r.rc == 0);
    CHECK(r.out.rfind("<?xml", 0) == 0);
    CHECK(r.out.find("</svg>") != std::string::npos);
    r = run({"show", name, "-p", "4", "-m", "8", "--format", "trace"});
    CHECK(r.rc == 0);
    CHECK(nlohmann::json::parse(r.out)["traceEvents"].size() > 0);
  }
  const auto csv = run({"show", "gpipe", "-p", "2", "-m", "2", "--format", "csv"});
  const auto svg = run({"check", write("g.csv", csv.out), "--format", "svg"});
  CHECK(svg.rc == 0);
  CHECK(svg.out.find("custom: ranks 2") != std::string::npos);
}

TEST_CASE("check: reads CSV and JSON, exit 0 valid, 1 invalid, 2 malformed") {
  auto ok = run({"check", write("ok.csv", "0F0,0F1,,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n"), "--cost", "F=1,B=2"});
  CHECK(ok.rc == 0);
  CHECK(ok.out.find("makespan 9.0") != std::string::npos);
  auto json = run({"show", "1f1b", "-p", "3", "-m", "4", "--format", "json"});
  auto back = run({"check", write("t.json", json.out), "--format", "json"});
  CHECK(back.rc == 0);
  CHECK(back.out.find("\"makespan\": 18.0") != std::string::npos);
  auto bad = run({"check", write("bad.csv", "0F0,0B0\n0F1,0B1\n")});
  CHECK(bad.rc == 1);
  CHECK(bad.out == "invalid: rank 1, position 0 (F stage 0 mb 1): each op must run on the rank that holds its stage\n");
  auto malformed = run({"check", write("m.csv", "0F0,zz\n")});
  CHECK(malformed.rc == 2);
  CHECK(lines(malformed.err) == 1);
  auto badjson = run({"check", write("m.json", "{\"ranks\": 2}")});
  CHECK(badjson.rc == 2);
  CHECK(badjson.err.find("missing key") != std::string::npos);
}

TEST_CASE("bad arguments: one line on stderr, exit 2") {
  for (auto args : std::vector<std::vector<std::string>>{{},
                                                         {"show"},
                                                         {"show", "1f1b", "-p", "x", "-m", "2"},
                                                         {"show", "1f1b", "-p", "2", "-m", "2", "--format", "png"},
                                                         {"show", "1f1b", "-p", "2", "-m", "2", "--cost", "F=-1"},
                                                         {"show", "1f1b", "-p", "2", "-m", "2", "--cost", "Q=1"},
                                                         {"show", "interleaved", "-p", "4", "-m", "10", "-v", "2"},
                                                         {"show", "gpipe", "-p", "100000", "-m", "100000"},
                                                         {"show", "zb_h1", "-p", "4", "-m", "8", "-v", "2"},
                                                         {"show", "zb_v", "-p", "4", "-m", "8", "-g", "4"},
                                                         {"show", "dualpipe_v", "-p", "4", "-m", "7"},
                                                         {"show", "dualpipe", "-p", "3", "-m", "12"},
                                                         {"show", "pipedream", "-p", "4", "-m", "2"},
                                                         {"show", "zero_bubble", "-p", "4", "-m", "8"},
                                                         {"show", "1f1b", "-p", "4", "-m", "4", "--skip", "0:1"},
                                                         {"show", "1f1b", "-p", "4", "-m", "4", "--skip", "1:4"},
                                                         {"show", "1f1b", "-p", "4", "-m", "4", "--skip", "0:2,0:2"},
                                                         {"show", "1f1b", "-p", "4", "-m", "4", "--skip", "0-2"},
                                                         {"show", "dualpipe", "-p", "4", "-m", "8", "--skip", "0:4"},
                                                         {"frobnicate"}}) {
    CAPTURE(args.size());
    const auto r = run(args);
    CHECK(r.rc == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("cost parsing") {
  const auto c = ctpipe::explorer::parse_costs("F=1,B=2,I=1.5,W=0.5,comm=0.25,FB=2.5");
  CHECK(c.forward == 1.0);
  CHECK(c.overlap == 2.5);
  CHECK(c.backward_input == 1.5);
  CHECK(c.comm == 0.25);
  CHECK_THROWS_AS(ctpipe::explorer::parse_costs("F"), std::invalid_argument);
  CHECK_THROWS_AS(ctpipe::explorer::parse_costs("F=abc"), std::invalid_argument);
}

TEST_CASE("show: every built-in schedule by name, with the split-backward figures") {
  for (const char* name : {"naive", "gpipe", "1f1b", "zb_h1", "zb_h2", "zb_v", "v_min", "v_half", "dualpipe_v",
                           "dualpipe", "pipedream", "pipedream_2bw"}) {
    CAPTURE(name);
    const auto r = run({"show", name, "-p", "4", "-m", "8"});
    CHECK(r.rc == 0);
    CHECK(r.out.rfind(std::string(name) + ": ranks 4", 0) == 0);
  }
  for (const char* name : {"interleaved", "looped_bfs", "interleaved_zero_bubble"}) {
    CAPTURE(name);
    const auto r = run({"show", name, "-p", "4", "-m", "8", "-v", "2"});
    CHECK(r.rc == 0);
    CHECK(r.out.find("chunks 2") != std::string::npos);
  }
  // ZB-H2 at F = I = W = 1: global makespan 27, every span 24, no bubble within a span.
  auto r = run({"show", "zb_h2", "-p", "4", "-m", "8", "--cost", "F=1,I=1,W=1"});
  CHECK(r.out.find("makespan 27.0") != std::string::npos);
  CHECK(r.out.find("span per rank 24.0 24.0 24.0 24.0") != std::string::npos);
  CHECK(r.out.find("bubble per rank 0.0 0.0 0.0 0.0") != std::string::npos);
  CHECK(r.out.find("bubble rate 0.0") != std::string::npos);
  CHECK(r.out.find("awaiting I at the peak 7 5 3 1") != std::string::npos);
  CHECK(r.out.find("awaiting W at the peak 0 2 4 6") != std::string::npos);
  // DualPipeV: overlapped pairs in the grid and in PyTorch's CSV; FB sets their cost.
  r = run({"show", "dualpipe_v", "-p", "4", "-m", "8", "--cost", "F=0.5,B=1,I=0.5,W=0.5"});
  CHECK(r.out.find("0F7&7B3") != std::string::npos);
  CHECK(r.out.find("makespan 27.0") != std::string::npos);
  r = run({"show", "dualpipe_v", "-p", "4", "-m", "8", "--cost", "F=0.5,B=1,I=0.5,W=0.5,FB=1", "--format", "json"});
  CHECK(r.out.find("\"overlapped\": true") != std::string::npos);
  CHECK(r.out.find("\"makespan\": 27.0") == std::string::npos);
  r = run({"show", "dualpipe_v", "-p", "4", "-m", "8", "--format", "csv", "--compute-only"});
  CHECK(r.out.find("(0F7;7B3)OVERLAP_F_B") != std::string::npos);
  // DualPipe: two directions; JSON says so and reads back to a table that verifies.
  r = run({"show", "dualpipe", "-p", "4", "-m", "8", "--cost", "F=1,I=1,W=1"});
  CHECK(r.out.find("makespan 26.0") != std::string::npos);
  CHECK(r.out.find("0F3&7B5") != std::string::npos);
  r = run({"show", "dualpipe", "-p", "4", "-m", "8", "--format", "json"});
  CHECK(r.out.find("\"directions\": 2") != std::string::npos);
  CHECK(run({"check", write("dp.json", r.out)}).rc == 0);
}

TEST_CASE("check: PyTorch CSVs with I, W and overlapped pairs") {
  // ZB-H1 at p = 2, m = 2 (compute only: lowered on reading).
  auto zb =
      run({"check", write("zb.csv", "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n"), "--cost", "F=1,I=1,W=1"});
  CHECK(zb.rc == 0);
  CHECK(zb.out.find("awaiting W at the peak") != std::string::npos);
  // The explorer's own DualPipeV CSV, with comm ops, reads back and verifies.
  const auto csv = run({"show", "dualpipe_v", "-p", "2", "-m", "4", "--format", "csv"});
  auto back = run({"check", write("dpv.csv", csv.out)});
  CHECK(back.rc == 0);
  // A pair whose second half is not a full backward: exit 2, one line naming the cell.
  auto bad = run({"check", write("pair.csv", "(0F0;0I0)OVERLAP_F_B\n")});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("cell 1") != std::string::npos);
  CHECK(lines(bad.err) == 1);
}

TEST_CASE("check: a table with skip messages, from CSV, a skip message that skips its crossing's rule is invalid") {
  // Naive p = 3, stage 0 feeding stage 2 straight: the skip buffers are in the figures.
  const std::string good =
      "0F0,0SEND_F0,0SEND_SKIP_F0>2,0RECV_B0,0RECV_SKIP_B0<2,0B0\n"
      "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0\n"
      "2RECV_F0,2RECV_SKIP_F0<0,2F0,2B0,2SEND_B0,2SEND_SKIP_B0>0\n";
  auto ok = run({"check", write("skip.csv", good)});
  CHECK(ok.rc == 0);
  CHECK(ok.out.find("skip value slots per rank 0 0 1") != std::string::npos);
  CHECK(ok.out.find("skip gradient slots per rank 1 0 0") != std::string::npos);
  // Its JSON keeps the crossing and reads back.
  auto json = run({"check", write("skip2.csv", good), "--format", "json"});
  CHECK(json.out.find("\"crossings\": [{\"from\": 0, \"to\": 2, \"bytes\": 0}]") != std::string::npos);
  CHECK(run({"check", write("skip.json", json.out)}).rc == 0);
  // Stage 2 uses the value before it has received it.
  std::string late = good;
  late.replace(late.find("2RECV_SKIP_F0<0,2F0"), 19, "2F0,2RECV_SKIP_F0<0");
  auto bad = run({"check", write("late.csv", late)});
  CHECK(bad.rc == 1);
  CHECK(bad.out.find("rank 2, position 1 (F stage 2 mb 0): an op whose input is on another rank must be preceded by "
                     "its receive") != std::string::npos);
}

TEST_CASE("show --skip: a built-in schedule with skip messages, in every format") {
  // 1F1B p = 4, stage 0 feeding stage 2 and stage 1 feeding stage 3 straight (given out of order).
  const auto text = run({"show", "1f1b", "-p", "4", "-m", "4", "--skip", "1:3,0:2"});
  CHECK(text.rc == 0);
  CHECK(text.out.find("skip value slots per rank") != std::string::npos);
  const auto json = run({"show", "1f1b", "-p", "4", "-m", "4", "--skip", "1:3,0:2", "--format", "json"});
  CHECK(json.out.find(
            "\"crossings\": [{\"from\": 0, \"to\": 2, \"bytes\": 0}, {\"from\": 1, \"to\": 3, \"bytes\": 0}]") !=
        std::string::npos);
  CHECK(run({"check", write("skips.json", json.out)}).rc == 0);
  const auto csv = run({"show", "1f1b", "-p", "4", "-m", "4", "--skip", "0:2", "--format", "csv"});
  CHECK(csv.out.find("0SEND_SKIP_F0>2") != std::string::npos);
  CHECK(run({"check", write("skips.csv", csv.out)}).rc == 0);
  const auto svg = run({"show", "1f1b", "-p", "4", "-m", "4", "--skip", "0:2", "--format", "svg"});
  CHECK(svg.out.find("skip") != std::string::npos);
  // DualPipe: a crossing names stages of one chain (p of them), and each chain gets its copy.
  CHECK(run({"show", "dualpipe", "-p", "4", "-m", "8", "--skip", "0:3"}).rc == 0);
}

TEST_CASE("plan: a model file in JSON or CSV, the best plans listed") {
  const auto json = write("model.json", R"({"input_bytes": 16, "layers": [
    {"name": "block", "repeat": 8, "forward": 1, "backward": 2, "activation_bytes": 16, "output_bytes": 4,
     "parameter_bytes": 100}]})");
  auto r = run({"plan", json, "--devices", "4", "--batch", "16", "--max-microbatches", "8", "--max-chunks", "2"});
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("plans for 8 layers on 4 devices (memory unlimited), global batch 16") != std::string::npos);
  // Free links and no memory limit: four replicas of one rank, no bubble: 4 samples x 8 layers x 3.
  CHECK(r.out.find("  1  1f1b                         1 x 4") != std::string::npos);
  // On one rank, every schedule is 1F1B's plan: named once.
  CHECK(r.out.find("plans on one rank were the same as 1f1b's there") != std::string::npos);
  CHECK(r.out.find("96") != std::string::npos);
  CHECK(r.out.find("searched ") != std::string::npos);
  // The same model as CSV (backward given as I and W), and the same answer.
  const auto csv =
      write("model.csv",
            "# a comment\nname,repeat,forward,backward_input,backward_weight,activation_bytes,output_bytes,"
            "parameter_bytes,input_bytes\nblock,8,1,1,1,16,4,100,16\n");
  auto c = run({"plan", csv, "--devices", "4", "--batch", "16", "--max-microbatches", "8", "--max-chunks", "2"});
  CHECK(c.rc == 0);
  CHECK(c.out == r.out);
  // Memory: 1,400 bytes per device; four replicas (3,200 bytes) are named as over it.
  auto m =
      run({"plan", json, "-n", "4", "-b", "16", "--memory", "1400B", "--max-microbatches", "8", "--max-chunks", "2"});
  CHECK(m.rc == 0);
  CHECK(m.out.find("faster, but over the memory of a device:") != std::string::npos);
  // Nothing fits: exit 1, the fastest named.
  auto none = run({"plan", json, "-n", "4", "-b", "16", "--memory", "10"});
  CHECK(none.rc == 1);
  CHECK(none.out.find("no plan fits in 10 B per device") != std::string::npos);
  // A subset of schedules, no recomputation.
  auto sub = run({"plan", json, "-n", "2", "-b", "8", "--schedules", "1f1b,zb_h1", "--no-recompute", "--top", "8"});
  CHECK(sub.rc == 0);
  CHECK(sub.out.find("gpipe") == std::string::npos);
  CHECK(sub.out.find(" yes ") == std::string::npos);
}

TEST_CASE("plan: a GPT's model file: measured sizes, a tied head, residual skips, a reserve") {
  // An embedding, two residual blocks (a layer and an add that also reads the block's input), and
  // a head tied to the embedding; the block's layer measured at 1, 4 and 16 samples.
  const auto gpt = write("gpt.json", R"({"input_bytes": 4, "layers": [
    {"name": "wte", "forward": 1, "backward": 1, "output_bytes": 64, "parameter_bytes": 1000},
    {"name": "mlp", "timings": [{"samples": 1, "forward": 5, "backward_input": 5, "backward_weight": 5},
                                {"samples": 4, "forward": 8, "backward": 16},
                                {"samples": 16, "forward": 20, "backward_input": 20, "backward_weight": 20}],
     "activation_bytes": 64, "output_bytes": 64, "parameter_bytes": 500},
    {"name": "add", "forward": 0.1, "backward": 0.1, "skip": 2, "output_bytes": 64},
    {"name": "mlp2", "timings": [{"samples": 4, "forward": 8, "backward": 16}], "output_bytes": 64,
     "parameter_bytes": 500},
    {"name": "add2", "forward": 0.1, "backward": 0.1, "skip": 2, "output_bytes": 64},
    {"name": "head", "forward": 1, "backward": 2, "shares_with": "wte", "parameter_bytes": 1000}]})");
  auto r = run({"plan", gpt, "-n", "2", "-b", "16", "--memory", "20000B", "--reserve", "10%", "--top", "8"});
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("plans for 6 layers on 2 devices of 19.53 KiB (1.95 KiB of it reserved), global batch 16") !=
        std::string::npos);
  // One rank, two replicas: the tied matrix once, 2,000 bytes x 4 = 8,000 bytes of state with the
  // activations; 2 ranks hold a copy each.
  CHECK(r.out.find("    1 x 2 ") != std::string::npos);
  CHECK(r.out.find("    2 x 1 ") != std::string::npos);
  // A reserve that leaves nothing fitting: exit 1.
  CHECK(run({"plan", gpt, "-n", "2", "-b", "16", "--memory", "20000B", "--reserve", "19000B"}).rc == 1);
}

TEST_CASE("plan: --ranks and --microbatches narrow the search, and --emit-header writes the best plan as a header") {
  const auto json = write("narrow.json", R"({"input_bytes": 16, "layers": [
    {"name": "in", "forward": 1, "backward": 2, "output_bytes": 4},
    {"name": "block", "repeat": 6, "forward": 2, "backward": 4, "output_bytes": 4},
    {"name": "head", "forward": 6, "backward": 12, "output_bytes": 4, "parameter_bytes": 100}]})");
  const auto header = (std::filesystem::temp_directory_path() / "ctpipe_explorer_test_files" / "plan.hpp").string();
  std::filesystem::remove(header);
  auto r = run({"plan", json, "-n", "2", "-b", "48", "--ranks", "2", "--microbatches", "12", "--schedules", "1f1b",
                "--top", "8", "--emit-header", header, "--namespace", "my::plan"});
  CAPTURE(r.out);
  CHECK(r.rc == 0);
  CHECK(r.out.find("    1 x 2 ") == std::string::npos);  // no plan of one rank
  CHECK(r.out.find("  1  1f1b                         2 x 1       12 x 4 ") != std::string::npos);
  // The only other plan of that shape: the same with recomputation.
  CHECK(r.out.find("  2  1f1b                         2 x 1       12 x 4          1  yes") != std::string::npos);
  CHECK(r.out.find("searched 2 plans") != std::string::npos);
  CHECK(r.out.find("wrote the best plan to " + header + " (namespace my::plan)") != std::string::npos);
  std::ifstream in(header);
  const std::string h((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CAPTURE(h);
  CHECK(h.find("namespace my::plan {") != std::string::npos);
  CHECK(h.find("inline constexpr auto schedule = ctpipe::one_f_one_b(2, 12);") != std::string::npos);
  CHECK(h.find("inline constexpr int microbatch_size = 4;") != std::string::npos);
  // The head (and the loss counted in it) is 3 of the 8 layers' time (6 x 3 of 1 x 3 + 6 x 6 + 6 x 3): the
  // planner's split [0, 5, 8] gives the stages 27 and 27; the declared costs would not see it.
  CHECK(h.find("return ctpipe::stage_bounds<Model, 0, 5, 8>();") != std::string::npos);
  CHECK(h.find("static_assert(Model::size == layers") != std::string::npos);
  // Recomputation where the plan recomputes; a chunked schedule's chunks.
  auto g = run({"plan", json, "-n", "2", "-b", "48", "--ranks", "2", "--schedules", "interleaved", "--microbatches",
                "12", "--max-chunks", "2", "--emit-header", header});
  CHECK(g.rc == 0);
  std::ifstream in2(header);
  const std::string h2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  CHECK(h2.find("inline constexpr auto schedule = ctpipe::interleaved(2, 12, 2);") != std::string::npos);
  CHECK(h2.find("namespace ctpipe_plan {") != std::string::npos);
  // Refused: a bad namespace, a depth or count outside the devices or the batch, a header where
  // nothing fits (exit 2, one line, no file written), a file that cannot be written.
  expect_refused({"plan", json, "-n", "2", "-b", "48", "--namespace", "1plan"}, "--namespace must be a C++ name");
  expect_refused({"plan", json, "-n", "2", "-b", "48", "--namespace", "a::"}, "--namespace must be a C++ name");
  expect_refused({"plan", json, "-n", "2", "-b", "48", "--ranks", "3"}, "--ranks must be from 1 to --devices (2)");
  expect_refused({"plan", json, "-n", "2", "-b", "48", "--microbatches", "49"},
                 "--microbatches must be from 1 to --batch (48)");
  std::filesystem::remove(header);
  const auto none = run({"plan", json, "-n", "2", "-b", "48", "--memory", "10", "--emit-header", header});
  CHECK(none.rc == 2);
  CHECK(none.err == "ctpipe: --emit-header: no plan fits, so no header was written\n");
  CHECK_FALSE(std::filesystem::exists(header));
  expect_refused({"plan", json, "-n", "2", "-b", "48", "--emit-header", "/nonexistent/dir/plan.hpp"},
                 "--emit-header: cannot write '/nonexistent/dir/plan.hpp'");
}

TEST_CASE("plan: a model file's calibration scales each measured stage's layers, and the split follows") {
  // The model of the --emit-header case (split [0, 5, 8] by its layers' times), with a run of 1F1B
  // on two stages [0, 5) and [5, 8) at 4 samples a microbatch: the first stage as predicted (F 36,
  // backward 72), the second twice as long (80, 160). Its two blocks now weigh 12 each, the head 36:
  // a block moves to the first stage.
  const auto calibrated = write("calibrated.json", R"({"input_bytes": 16, "layers": [
    {"name": "in", "forward": 1, "backward": 2, "output_bytes": 4},
    {"name": "block", "repeat": 6, "forward": 2, "backward": 4, "output_bytes": 4},
    {"name": "head", "forward": 6, "backward": 12, "output_bytes": 4, "parameter_bytes": 100}],
    "calibration": {"samples": 4, "first_layers": [0, 5], "forward": [36, 80], "backward": [72, 160]}})");
  const auto header =
      (std::filesystem::temp_directory_path() / "ctpipe_explorer_test_files" / "calibrated.hpp").string();
  const auto r = run({"plan", calibrated, "-n", "2", "-b", "48", "--ranks", "2", "--microbatches", "12", "--schedules",
                      "1f1b", "--emit-header", header});
  CAPTURE(r.err);
  REQUIRE(r.rc == 0);
  std::ifstream in(header);
  const std::string h((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(h.find("return ctpipe::stage_bounds<Model, 0, 6, 8>();") != std::string::npos);
  // Refused, one line each: the calibration's keys, its lists, its rules.
  const auto bad = [&](const std::string& name, const std::string& calibration, const std::string& words) {
    expect_refused({"plan",
                    write(name, R"({"layers": [{"forward": 1, "backward": 2}, {"forward": 1, "backward": 2}],
                                    "calibration": )" +
                                    calibration + "}"),
                    "-n", "1", "-b", "1"},
                   words);
  };
  bad("c1.json", R"({"samples": 1, "first_layers": [0], "forward": [1], "backward": [1], "extra": 1})",
      "model file: calibration: unknown key \"extra\"");
  bad("c2.json", R"({"samples": 1, "first_layers": [0], "forward": [1]})",
      "model file: calibration: backward is missing");
  bad("c3.json", R"({"samples": 1, "first_layers": [0, 1], "forward": [1], "backward": [1]})",
      "first_layers, forward and backward must have one entry for each stage");
  bad("c4.json", R"({"samples": 1, "first_layers": [0, 2], "forward": [1, 1], "backward": [1, 1]})",
      "model file: calibration: a calibration's stages' first layers must start at 0 and grow");
  bad("c5.json", R"({"samples": 0, "first_layers": [0], "forward": [1], "backward": [1]})",
      "a calibration's microbatch size must be more than 0 samples");
  bad("c6.json", R"({"samples": 1, "first_layers": [0], "forward": [-1], "backward": [1]})",
      "a calibration's measured times must be numbers from 0 to 1e18 seconds");
  bad("c7.json", R"({"samples": 1, "first_layers": [0.5], "forward": [1], "backward": [1]})",
      "first layers must start at 0");
  bad("c8.json", R"({"samples": 1, "first_layers": 0, "forward": [1], "backward": [1]})",
      "first_layers must be a list of numbers");
  bad("c9.json", "[]", "calibration: an object with samples, first_layers, forward and backward is expected");
  expect_refused({"plan", write("c10.json", R"({"layers": [{"forward": 1e-12, "backward": 2}],
                                       "calibration": {"samples": 1, "first_layers": [0], "forward": [1e7],
                                                       "backward": [1]}})"),
                  "-n", "1", "-b", "1"},
                 "model file: calibration: a calibration may scale a stage's layers by at most 1e18");
}

TEST_CASE("plan: bad model files and options: one line, exit 2") {
  const auto bad = expect_refused;
  const auto ok = write("ok.json", R"({"layers": [{"forward": 1, "backward": 2}]})");
  bad({"plan", write("m1.json", "{\"layers\": [{\"forwrd\": 1}]}"), "-n", "1", "-b", "1"},
      "model file: layer 0: unknown field \"forwrd\"");
  bad({"plan", write("m2.json", "{\"layers\": [{\"forward\": -1}]}"), "-n", "1", "-b", "1"},
      "layer 0: forward must be a number between 0 and 1e18");
  bad({"plan", write("m3.json", "{\"layers\": []}"), "-n", "1", "-b", "1"}, "model file: no layers");
  bad({"plan", write("m4.json", "{\"layers\": [{\"repeat\": 0.5}]}"), "-n", "1", "-b", "1"}, "repeat must be a whole");
  bad({"plan", write("m5.json", "{\"layers\": [{\"backward\": 1, \"backward_input\": 1}]}"), "-n", "1", "-b", "1"},
      "not both");
  bad({"plan", write("m6.json", "{\"layers\": "), "-n", "1", "-b", "1"}, "model file: not valid JSON");
  bad({"plan", write("m7.csv", "forward,bogus\n1,2\n"), "-n", "1", "-b", "1"}, "line 1: unknown column \"bogus\"");
  bad({"plan", write("m8.csv", "forward,backward\n1\n"), "-n", "1", "-b", "1"}, "line 2: 1 cells, the header has 2");
  bad({"plan", write("m9.csv", "forward\nfast\n"), "-n", "1", "-b", "1"}, "line 2: forward is not a number: 'fast'");
  bad({"plan", "/nonexistent/model.json", "-n", "1", "-b", "1"}, "cannot open");
  bad({"plan", ok, "-n", "0", "-b", "1"}, "--devices must be from 1");
  bad({"plan", ok, "-n", "1", "-b", "0"}, "--batch must be from 1");
  bad({"plan", write("m10.json", "{\"layers\": [{\"repeat\": 1000}, {\"repeat\": 100}]}"), "-n", "1", "-b", "1"},
      "more than 1024 layers");
  bad({"plan", ok, "-n", "1", "-b", "1", "--memory", "lots"}, "--memory: 'lots' is not a size");
  bad({"plan", ok, "-n", "1", "-b", "1", "--schedules", "1f1b,pipedream"}, "--schedules: unknown schedule 'pipedream'");
  bad({"plan", ok, "-n", "1", "-b", "1", "--top", "9"}, "--top must be from 1 to 8");
  bad({"plan", ok, "-n", "1", "-b", "1", "--latency", "-1"}, "--latency must be a number >= 0");
  bad({"plan", ok, "-n", "1"}, "--batch");
  // A GPT's fields: timings, shares_with, skip.
  bad({"plan", write("t1.json", R"({"layers": [{"timings": [{"samples": 4, "forward": 1}, {"samples": 2}]}]})"), "-n",
       "1", "-b", "1"},
      "layer 0: timings[1]: samples must grow from one measured size to the next");
  bad({"plan", write("t2.json", R"({"layers": [{"timings": [{"samples": 0}]}]})"), "-n", "1", "-b", "1"},
      "timings[0]: samples must be more than 0");
  bad({"plan", write("t3.json", R"({"layers": [{"timings": [{"samples": 1, "fwd": 1}]}]})"), "-n", "1", "-b", "1"},
      "timings[0]: unknown field \"fwd\"");
  bad({"plan", write("t4.json", R"({"layers": [{"forward": 1, "timings": [{"samples": 1}]}]})"), "-n", "1", "-b", "1"},
      "layer 0: give timings, or forward, backward and overhead, not both");
  bad({"plan", write("t5.json", R"({"layers": [{"timings": []}]})"), "-n", "1", "-b", "1"},
      "timings must be a list of 1 to 8 measured sizes");
  bad({"plan", write("s1.json", R"({"layers": [{"name": "a"}, {"shares_with": "b"}]})"), "-n", "1", "-b", "1"},
      "layer 1: shares_with: \"b\" is not the name of one earlier layer");
  bad({"plan", write("s2.json", R"({"layers": [{"shares_with": "a", "name": "a"}]})"), "-n", "1", "-b", "1"},
      "layer 0: shares_with: \"a\" is not the name of one earlier layer");
  bad({"plan", write("s3.json", R"({"layers": [{"name": "a"}, {"name": "a"}, {"shares_with": "a"}]})"), "-n", "1", "-b",
       "1"},
      "is not the name of one earlier layer");
  bad({"plan",
       write("s4.json", R"({"layers": [{"name": "a"}, {"name": "b", "shares_with": "a"}, {"shares_with": "b"}]})"),
       "-n", "1", "-b", "1"},
      "layer 2: shares_with: \"b\" shares another layer's parameters itself");
  bad({"plan", write("k1.json", R"({"layers": [{"skip": 1}]})"), "-n", "1", "-b", "1"},
      "layer 0: skip must be 0 or a whole number of layers back from 2 to 1024");
  bad({"plan", write("k2.csv", "forward,timings\n1,2\n"), "-n", "1", "-b", "1"},
      "line 1: timings is given only in a JSON model file");
  bad({"plan", ok, "-n", "1", "-b", "1", "--reserve", "1GiB"}, "--reserve needs --memory");
  bad({"plan", ok, "-n", "1", "-b", "1", "--memory", "1GiB", "--reserve", "1GiB"},
      "--reserve: 1.00 GiB leaves nothing of the 1.00 GiB of --memory");
  bad({"plan", ok, "-n", "1", "-b", "1", "--memory", "1GiB", "--reserve", "100%"},
      "--reserve: '100%' is not a percentage from 0 to below 100");
}

TEST_CASE("show and check: --mb-factors scales each microbatch's work") {
  auto even = run({"show", "1f1b", "-p", "2", "-m", "2", "--cost", "F=1,B=2"});
  auto uneven = run({"show", "1f1b", "-p", "2", "-m", "2", "--cost", "F=1,B=2", "--mb-factors", "1,3"});
  CHECK(even.rc == 0);
  CHECK(uneven.rc == 0);
  // 1F1B, 2 ranks, 2 microbatches, F = 1, B = 2, microbatch 1 three times as heavy: rank 1 runs
  // F0 (1..2) B0 (2..4) F1 (4..7) B1 (7..13), rank 0's B1 ends at 19 (9 when even).
  CHECK(even.out.find("makespan 9.0") != std::string::npos);
  CHECK(uneven.out.find("makespan 19.0") != std::string::npos);
  auto svg = run({"show", "1f1b", "-p", "2", "-m", "2", "--mb-factors", "1,3", "--format", "svg"});
  CHECK(svg.rc == 0);
  auto bad = run({"show", "1f1b", "-p", "2", "-m", "2", "--mb-factors", "1,x"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--mb-factors: 'x' is not a number") != std::string::npos);
}

TEST_CASE("compare: a measured step against its replay, from files") {
  const auto shown = run({"show", "1f1b", "-p", "2", "-m", "3", "--format", "json"});
  REQUIRE(shown.rc == 0);
  const auto table_file = write("ran.json", shown.out);
  std::istringstream table_text(shown.out);
  const auto t = ctpipe::explorer::read_json(table_text);
  // As it ran: every message took 0.5 (what the replay does not know).
  ctpipe::measured_step m;
  for (int r = 0; r < t.ranks(); ++r) m.ranks.emplace_back(t.program(r).size());
  ctpipe::simulate(t, ctpipe::cost_model{.forward = 1, .backward = 2, .comm = 0.5},
                   [&](int r, int i, double s, double e) {
                     m.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {s, e};
                   });
  const auto measured_file = write("ran.csv", ctpipe::to_csv(m));
  std::istringstream back(ctpipe::to_csv(m));
  CHECK(ctpipe::read_measured_csv(back).ranks.size() == 2);
  auto r = run({"compare", table_file, measured_file, "--top", "1"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("replayed with the measured task times") != std::string::npos);
  CHECK(r.out.find("rank 0, stage 0, microbatch 0, op B") != std::string::npos);
  auto svg = run({"compare", table_file, measured_file, "--format", "svg"});
  CHECK(svg.rc == 0);
  CHECK(svg.out.find("replay 1") != std::string::npos);
  auto trace = run({"compare", table_file, measured_file, "--format", "trace"});
  CHECK(trace.rc == 0);
  CHECK(nlohmann::json::parse(trace.out)["traceEvents"].size() > 10);
  // Bad input: one line, exit 2.
  const auto bad = expect_refused;
  bad({"compare", table_file, write("m1.csv", "rank,position,start,end\n0,0,1,x\n")},
      "line 2: rank,position,start,end expected");
  bad({"compare", table_file, write("m2.csv", "rank,position,start,end\n0,1,0,1\n")}, "rank 0, position 0 missing");
  bad({"compare", table_file, write("m3.csv", "rank,position,start,end\n0,0,0,1\n0,0,0,1\n")}, "given twice");
  bad({"compare", table_file, write("m4.csv", "r,p\n")}, "the header rank,position,start,end is expected");
  bad({"compare", table_file, write("m5.csv", "rank,position,start,end\n0,0,2,1\n")}, "0 <= start <= end");
  bad({"compare", table_file, write("m6.csv", "rank,position,start,end\n0,0,0,1\n")},
      "measured step: 1 ranks, the table has 2");
  bad({"compare", table_file, "/nonexistent.csv"}, "cannot open");
  // A table too large to analyse, from a few bytes: refused before anything is allocated for it.
  bad({"check", write("big.csv", "0F0,1F0,2F0,3F0,4F0\n0F999999\n")}, "stages x microbatches (5000000) is too large");
  bad({"check",
       write("big.json", R"({"ranks": 1, "microbatches": 1000000, "stage_rank": [0, 0, 0, 0, 0], "programs": [[]]})")},
      "JSON: stages x microbatches is too large");
}

TEST_CASE("check: a JSON number beyond int's range is refused, not converted (found by the fuzz test)") {
  expect_refused(
      {"check", write("huge.json", R"({"ranks": 1, "microbatches": 1e80, "stage_rank": [0], "programs": [[]]})")},
      "JSON: microbatches must be a whole number");
  expect_refused({"check", write("huge2.json",
                                 R"({"ranks": 1, "microbatches": 1, "stage_rank": [99999999999], "programs": [[]]})")},
                 "JSON: stage_rank must be a whole number");
}

namespace {
// A scratch folder of hang-report files, emptied; and the files of a real hang (samples/hang: under
// mpirun, process 1's layer hung in its first forward of step 3, process 0 timed out waiting).
std::filesystem::path hang_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "ctpipe_explorer_test_files" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
nlohmann::json hang_sample(int process) {
  std::ifstream in(std::string(CTPIPE_SAMPLES_DIR) + "/hang/process-" + std::to_string(process) + ".json");
  return nlohmann::json::parse(in);
}
void put(const std::filesystem::path& file, const nlohmann::json& j) { std::ofstream(file) << j.dump(); }
// A live record: magic, step, pass, position, state, peer, since, pid.
void put_live(const std::filesystem::path& file, std::int64_t step, std::int64_t position, std::int64_t state,
              std::int64_t magic = 0x31766c6570697074) {
  const std::int64_t w[8] = {magic, step, 0, position, state, -1, 0, 1};
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof(w));
}
}  // namespace

TEST_CASE("hang-report: a layer that hung, in words, as JSON and as a trace") {
  const std::string dir = std::string(CTPIPE_SAMPLES_DIR) + "/hang";
  const auto text = run({"hang-report", dir});
  CAPTURE(text.err);
  REQUIRE(text.rc == 0);
  CHECK(text.out.find("ctpipe hang report: 1f1b, 2 ranks x 1 replica, step 3") == 0);
  CHECK(text.out.find("The first task that never completed: process 1 (rank 1, replica 0), task 1, F stage 1 "
                      "microbatch 0. Why: it hangs in task 1, F stage 1 microbatch 0: running it for") !=
        std::string::npos);
  CHECK(text.out.find("process 0 (rank 0, replica 0): waits for") != std::string::npos);
  CHECK(text.out.find("in task 4, RECV_B stage 0 microbatch 0 for process 1 (its task 3, SEND_B stage 1 microbatch 0, "
                      "not run): timed out") != std::string::npos);
  CHECK(text.out.find("  > 1  F stage 1 microbatch 0  <- never completed") != std::string::npos);
  const auto json = run({"hang-report", "--format", "json", dir});
  REQUIRE(json.rc == 0);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j.at("cause").at("process") == 1);
  CHECK(j.at("cause").at("position") == 1);
  CHECK(j.at("cause").at("kind") == "hangs");
  CHECK(j.at("cause").at("task").at("op") == "F");
  CHECK(j.at("standing").at(0).at("kind") == "waits");
  CHECK(j.at("standing").at(0).at("peer") == 1);
  const auto trace = run({"hang-report", "-f", "trace", dir});
  REQUIRE(trace.rc == 0);
  const auto events = nlohmann::json::parse(trace.out).at("traceEvents");
  int never = 0, waiting = 0, ran = 0;
  for (const auto& e : events) {
    if (e.value("cat", "") == "never completed" && e.at("pid") == 1 && e.at("name") == "F s1 mb0") ++never;
    if (e.value("cat", "") == "waiting here" && e.at("pid") == 0 && e.at("name") == "RECV_B s0 mb0") ++waiting;
    if (e.value("cat", "") == "ran") ++ran;
  }
  CHECK(never == 1);
  CHECK(waiting == 1);
  CHECK(ran == 5);  // process 0's tasks 0 to 3, process 1's task 0
}

TEST_CASE("hang-report: a process killed outright, one without a record, a cycle of waits") {
  SUBCASE("killed: its live record names the task") {
    const auto dir = hang_dir("killed");
    put(dir / "process-0.json", hang_sample(0));
    put_live(dir / "process-1.live", 3, 1, 1);
    const auto r = run({"hang-report", dir.string()});
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("process 1 (rank 1, replica 0), task 1, F stage 1 microbatch 0. Why: it died in task 1") !=
          std::string::npos);
  }
  SUBCASE("no record: the send its peer waits for") {
    const auto dir = hang_dir("missing");
    put(dir / "process-0.json", hang_sample(0));
    const auto r = run({"hang-report", dir.string()});
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("(1 of 2 processes left files)") != std::string::npos);
    CHECK(r.out.find("process 1 (rank 1, replica 0), task 3, SEND_B stage 1 microbatch 0. Why: it left no record") !=
          std::string::npos);
  }
  SUBCASE("an old report: the live record of a later step wins") {
    const auto dir = hang_dir("old");
    put(dir / "process-0.json", hang_sample(0));
    auto old = hang_sample(1);
    old["step"] = 2;
    old["event"] = "failure";
    put(dir / "process-1.json", old);
    put_live(dir / "process-1.live", 3, 2, 1);
    const auto r = run({"hang-report", dir.string()});
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("task 2, B stage 1 microbatch 0. Why: it died in task 2") != std::string::npos);
  }
  SUBCASE("a cycle") {
    const auto dir = hang_dir("cycle");
    auto a = hang_sample(0), b = hang_sample(1);
    b["state"] = "receiving";
    b["position"] = 0;
    b["peer"] = 0;
    b["event"] = "timeout";
    put(dir / "process-0.json", a);
    put(dir / "process-1.json", b);
    const auto r = run({"hang-report", dir.string()});
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("the waits form a cycle (process 0 -> process 1 -> process 0)") != std::string::npos);
  }
}

TEST_CASE("hang-report: bad folders and files, one line and exit 2") {
  expect_refused({"hang-report", "/nonexistent/ctpipe"}, "hang-report: '/nonexistent/ctpipe' is not a folder");
  expect_refused({"hang-report", hang_dir("empty").string()}, "no report (process-N.json)");
  const auto bad = hang_dir("bad");
  std::ofstream(bad / "process-0.json") << "{not json";
  expect_refused({"hang-report", bad.string()}, "process-0.json is not valid JSON");
  const auto other = hang_dir("other");
  std::ofstream(other / "process-0.json") << "{\"ranks\": 2}";
  expect_refused({"hang-report", other.string()}, "process-0.json is not a ctpipe hang report");
  const auto jobs = hang_dir("jobs");
  put(jobs / "process-0.json", hang_sample(0));
  auto four = hang_sample(1);
  four["processes"] = 4;
  four["replicas"] = 2;
  put(jobs / "process-1.json", four);
  expect_refused({"hang-report", jobs.string()}, "are of different jobs");
  const auto beyond = hang_dir("beyond");
  put(beyond / "process-0.json", hang_sample(0));
  put(beyond / "process-7.json", hang_sample(1));
  expect_refused({"hang-report", beyond.string()}, "process-7 is not of this job's 2 processes");
  const auto live = hang_dir("live");
  put(live / "process-0.json", hang_sample(0));
  put_live(live / "process-1.live", 3, 1, 1, 42);
  expect_refused({"hang-report", live.string()}, "process-1.live is not a ctpipe live record");
  expect_refused({"hang-report", "-f", "svg", live.string()}, "--format");
}

TEST_CASE("synth: a schedule for given costs and a memory limit, its line, its table in every format") {
  const auto r = run({"synth", "-p", "4", "-m", "8", "--memory", "4", "--cost", "F=2,I=3,W=1,comm=1"});
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("synthesised for a limit of 4 activations a rank: ", 0) == 0);
  CHECK(r.out.find("the heuristic's own: span ") != std::string::npos);
  CHECK(r.out.find("synthesised: ranks 4, microbatches 8") != std::string::npos);
  const auto csv = run({"synth", "-p", "4", "-m", "8", "--memory", "4", "--heuristic-only", "--format", "csv"});
  CHECK(csv.rc == 0);
  CHECK(csv.out.find("synthesised for") == std::string::npos);  // the table alone
  CHECK(run({"synth", "-p", "3", "-m", "6", "--memory", "2", "--stage-costs", "1,1,1/2,2,1/4,4,2", "--format", "svg"})
            .out.find("<svg") != std::string::npos);
  expect_refused({"synth", "-p", "4", "-m", "8", "--memory", "0"},
                 "memory_limit (0) must be at least one microbatch's activations");
  // The Zero Bubble paper's memory model: its 1.5B model's ZB-2p (Table 5: bubble rate 0.0433).
  const auto paper = run({"synth", "-p", "8", "-m", "24", "--memory", std::to_string(16 * 201216), "--activation",
                          "201216", "--weight-stash", "73728", "--cost", "F=18522,I=18086,W=9337,comm=601",
                          "--heuristic-only", "--format", "csv"});
  CHECK(paper.rc == 0);
  CHECK(paper.out.find("synthesised for") == std::string::npos);  // csv: the table alone
  const auto paper_text =
      run({"synth", "-p", "8", "-m", "24", "--memory", std::to_string(16 * 201216), "--activation", "201216",
           "--weight-stash", "73728", "--cost", "F=18522,I=18086,W=9337,comm=601", "--heuristic-only"});
  CHECK(paper_text.out.find("a rank (201216 from F, 73728 of it from I to W): the heuristic's own order") !=
        std::string::npos);
  CHECK(paper_text.out.find("bubble rate 0.0433") != std::string::npos);
  expect_refused({"synth", "-p", "4", "-m", "8", "--memory", "8", "--activation", "2", "--weight-stash", "3"},
                 "costs.weight_stash from 0 to costs.activation");
  expect_refused({"synth", "-p", "3", "-m", "8", "--memory", "2", "--stage-costs", "1,1,1/2,2"}, "expected F,I,W");
  expect_refused({"synth", "-p", "3", "-m", "8", "--memory", "2", "--stage-costs", "1,1,1"},
                 "1 stages given, 3 expected (one a rank, two on V placement)");
  // V placement: rank r holds stages r and 2p-1-r; 2p stage costs; 1F1B's memory is 2p stage activations.
  const auto v = run({"synth", "-p", "4", "-m", "8", "--memory", "8", "--placement", "v", "--cost", "F=1,I=1,W=1"});
  CHECK(v.rc == 0);
  CHECK(v.out.rfind("synthesised for a limit of 8 activations of a stage a rank: the heuristic's own order, span 48, "
                    "bubble rate 0, peak 8",
                    0) == 0);
  CHECK(v.out.find("synthesised: ranks 4, microbatches 8, stages 8, chunks 2") != std::string::npos);
  const auto v_tight = run({"synth", "-p", "4", "-m", "8", "--memory", "6", "--placement", "v"});
  CHECK(v_tight.out.find("V-Half's order") != std::string::npos);  // under 2p the handcrafted V-Half fits
  CHECK(run({"synth", "-p", "2", "-m", "4", "--memory", "4", "--placement", "v", "--stage-costs",
             "1,1,1/2,2,1/2,2,1/3,3,2", "--format", "svg"})
            .out.find("<svg") != std::string::npos);
  expect_refused({"synth", "-p", "2", "-m", "4", "--memory", "4", "--placement", "v", "--stage-costs", "1,1,1/2,2,1"},
                 "2 stages given, 4 expected");
  expect_refused({"synth", "-p", "4", "-m", "8", "--memory", "3", "--placement", "v"},
                 "memory_limit (3) leaves synthesis no order");
  expect_refused({"synth", "-p", "4", "-m", "8", "--memory", "8", "--placement", "w"}, "--placement");
  expect_refused({"synth", "-p", "2", "-m", "8", "--memory", "2", "--cost", "F=1.5"}, "F must be a whole number");
  expect_refused({"synth", "-p", "2", "-m", "8", "--memory", "2", "--cost", "B=3"}, "synth takes F, I, W and comm");
}
