// Checkpoints (ctpipe/optim/checkpoint.hpp) in one process: what a file holds (a shared parameter
// once), a round trip of parameters, optimizer state, update counts and training state, files
// refused with the file named and the mismatch said (truncated, damaged, another model, another
// rule, missing) with nothing loaded, a failed save that leaves the last good checkpoint, and a
// checkpoint read and written back by numpy alone (tests/tools/checkpoint_numpy.py). Resuming
// training bitwise at another depth: tests/exec/checkpoint.cpp (threads), tests/mpi/checkpoint.cpp.
#include <ctpipe/optim/checkpoint.hpp>

#include "support/mlp.hpp"  // test::parameters

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using ctpipe::layers::dense;
namespace models {
using tied = ctpipe::model<dense<1, 2, 2>, dense<1, 2, 2>, ctpipe::shared_with<0, dense<1, 2, 2>>>;
using untied = ctpipe::model<dense<1, 2, 2>, dense<1, 2, 2>, dense<1, 2, 2>>;
using wider = ctpipe::model<dense<1, 2, 3>, dense<1, 3, 2>, ctpipe::shared_with<0, dense<1, 2, 3>>>;
}  // namespace models

// A scratch directory of its own, removed at the end.
struct scratch {
  fs::path dir = fs::temp_directory_path() / ("ctpipe_checkpoint_" + std::to_string(::getpid()));
  scratch() { fs::create_directories(dir); }
  ~scratch() { fs::remove_all(dir); }
  std::string operator/(const char* name) const { return (dir / name).string(); }
};

template <class O>
std::vector<float> state_of(O& opt) {
  std::vector<float> v;
  for (std::size_t t = 0; t < 2; ++t)
    for (std::size_t j = 0; j < 2; ++j) {
      for (float x : opt.template state<0>(t, j)) v.push_back(x);
      for (float x : opt.template state<1>(t, j)) v.push_back(x);
    }
  for (std::size_t t = 0; t < 2; ++t)  // (its weights' state: layer 0's, loaded as a copy)
    for (std::size_t j = 0; j < 2; ++j)
      for (float x : opt.template state<2>(t, j)) v.push_back(x);
  return v;
}

// A tied model after two AdamW updates.
struct trained {
  models::tied m;
  ctpipe::optimizer<models::tied, ctpipe::adamw> opt{m, ctpipe::adamw{.lr = 0.01}};
  trained() {
    ctpipe::for_each_layer(m, [s = 1u](auto& l) mutable { l.init(s++); });
    ctpipe::tie_parameters(m);
    for (int step = 0; step < 2; ++step) {
      float g = 0.25f;
      ctpipe::for_each_parameter(m, [&](auto, auto gr) {
        for (float& x : gr) x = (g += 0.125f);
      });
      ctpipe::sum_shared_gradients(m);
      REQUIRE(opt.step().applied);
    }
  }
};

void expect_refused(const std::string& file, models::tied& m, ctpipe::optimizer<models::tied, ctpipe::adamw>& opt,
                    const std::string& message) {
  const std::vector<float> w = test::parameters(m), s = state_of(opt);
  const std::uint64_t n = opt.updates();
  try {
    (void)ctpipe::load_checkpoint(file, opt);
    FAIL("loaded");
  } catch (const ctpipe::checkpoint_error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find(file) != std::string::npos);
    CHECK(what.find(message) != std::string::npos);
  }
  CHECK(test::parameters(m) == w);  // nothing loaded
  CHECK(state_of(opt) == s);
  CHECK(opt.updates() == n);
}

}  // namespace

TEST_CASE("checkpoint: a file is named by a string, a C string or a std::filesystem::path") {
  scratch tmp;
  trained a;
  const fs::path path = tmp.dir / "p.safetensors";
  ctpipe::save_checkpoint(path, a.opt);  // (the parameter is a std::string: a path converts to it)
  CHECK(fs::exists(path));
  models::tied m;
  ctpipe::optimizer opt(m, ctpipe::adamw{.lr = 0.01});
  (void)ctpipe::load_checkpoint(path.c_str(), opt);
  CHECK(test::parameters(m) == test::parameters(a.m));
  CHECK(state_of(opt) == state_of(a.opt));
  // The directory synced after the rename: what holds the file.
  CHECK(ctpipe::detail::directory_of("runs/a.safetensors") == "runs");
  CHECK(ctpipe::detail::directory_of("/a.safetensors") == "/");
  CHECK(ctpipe::detail::directory_of("a.safetensors") == ".");
}

TEST_CASE(
    "checkpoint: parameters, state, update counts and training state round-trip, a shared parameter stored once") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "a.safetensors";
  ctpipe::save_checkpoint(file, a.opt, {{7, 24}, "epoch 1"});
  CHECK_FALSE(fs::exists(file + ".tmp"));
  models::tied m;
  ctpipe::optimizer opt(m, ctpipe::adamw{.lr = 0.01});
  const ctpipe::training_state s = ctpipe::load_checkpoint(file, opt);
  CHECK(s.origin.step == 7);
  CHECK(s.origin.first_microbatch == 24);
  CHECK(s.data == "epoch 1");
  CHECK(test::parameters(m) == test::parameters(a.m));
  CHECK(state_of(opt) == state_of(a.opt));
  CHECK(opt.updates() == 2);
  CHECK(opt.layer_updates(2) == 2);
  // The shared weights are stored once (layer 0's), and the copy in layer 2 loaded from them.
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\"layers.2.bias\"") != std::string::npos);
  CHECK(bytes.find("\"layers.2.weight\"") == std::string::npos);
  CHECK(bytes.find("\"optimizer.layers.2.weight.exp_avg\"") == std::string::npos);
  CHECK(std::memcmp(m.layer<2>().params.data(), m.layer<0>().params.data(), 4 * sizeof(float)) == 0);
  // The next update is the same from either.
  for (auto* o : {&a.m, &m})
    ctpipe::for_each_parameter(*o, [](auto, auto g) {
      for (float& x : g) x = 0.5f;
    });
  a.opt.step();
  opt.step();
  CHECK(test::parameters(m) == test::parameters(a.m));
  CHECK(state_of(opt) == state_of(a.opt));
}

TEST_CASE("checkpoint: a damaged, truncated or mismatched file is refused, naming the file, and loads nothing") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "a.safetensors";
  ctpipe::save_checkpoint(file, a.opt, {{3, 0}, ""});
  const auto size = fs::file_size(file);
  trained b;  // other values, the same model: what a refused load must leave as it was
  ctpipe::for_each_parameter(b.m, [](auto w, auto) {
    for (float& x : w) x += 1.0f;
  });
  SUBCASE("truncated") {
    const std::string cut = tmp / "cut.safetensors";
    fs::copy_file(file, cut);
    fs::resize_file(cut, size - 5);
    expect_refused(cut, b.m, b.opt, "the tensors cover");
    fs::resize_file(cut, 100);
    expect_refused(cut, b.m, b.opt, "does not fit in the file");
    fs::resize_file(cut, 3);
    expect_refused(cut, b.m, b.opt, "too short for a safetensors file");
  }
  SUBCASE("damaged header") {
    const std::string bad = tmp / "bad.safetensors";
    fs::copy_file(file, bad);
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put('[');
    f.close();
    expect_refused(bad, b.m, b.opt, "its header is damaged: its checksum is ");
  }
  SUBCASE("another model") {
    models::wider w;
    ctpipe::optimizer ow(w, ctpipe::adamw{});
    const std::string other = tmp / "wider.safetensors";
    ctpipe::save_checkpoint(other, ow);
    expect_refused(other, b.m, b.opt,
                   "tensor \"layers.0.weight\" is F32 [3, 2] in the file and F32 [2, 2] in this model");
    models::untied u;
    ctpipe::optimizer ou(u, ctpipe::adamw{});
    const std::string untied = tmp / "untied.safetensors";
    ctpipe::save_checkpoint(untied, ou);
    expect_refused(untied, b.m, b.opt,
                   "the file holds tensor \"layers.2.weight\", which this model and optimizer do not have");
  }
  SUBCASE("another rule") {
    models::tied m;
    ctpipe::optimizer om(m, ctpipe::sgd_momentum{});
    const std::string momentum = tmp / "momentum.safetensors";
    ctpipe::save_checkpoint(momentum, om);
    expect_refused(momentum, b.m, b.opt,
                   "tensor \"optimizer.layers.0.weight.exp_avg\" (F32 [2, 2]) is not in the file: a checkpoint of "
                   "another model or another optimizer rule");
    // Its parameters alone load, for evaluation or a new optimizer.
    ctpipe::load_parameters(momentum, b.opt);
    CHECK(test::parameters(b.m) == test::parameters(m));
  }
  SUBCASE("missing") { expect_refused(tmp / "none.safetensors", b.m, b.opt, "cannot open it"); }
}

namespace {
std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

TEST_CASE("checkpoint: every damaged byte and every truncation is refused, naming what is damaged, loading nothing") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "a.safetensors", bad = tmp / "bad.safetensors";
  ctpipe::save_checkpoint(file, a.opt, {{3, 4}, "data"});
  const std::string good = read_bytes(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(good[static_cast<std::size_t>(i)]);
  const ctpipe::safetensors::header h = ctpipe::safetensors::read_header(good.substr(8, n), good.size() - 8 - n);
  trained b;
  ctpipe::for_each_parameter(b.m, [](auto w, auto) {
    for (float& x : w) x += 1.0f;
  });
  const std::vector<float> w = test::parameters(b.m), st = state_of(b.opt);
  const auto refused = [&](const std::string& bytes) -> std::string {
    write_bytes(bad, bytes);
    try {
      (void)ctpipe::load_checkpoint(bad, b.opt);
    } catch (const ctpipe::checkpoint_error& e) {
      return e.what();
    }
    return "loaded";
  };
  int cases = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (const unsigned char flip : {0x01, 0x20, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]) ^ flip);
      const std::string what = refused(bytes);
      CAPTURE(i);
      CAPTURE(what);
      if (i < 8) {
        CHECK(what.find("its header length") != std::string::npos);
      } else if (i < 8 + n) {
        CHECK(what.find("header") != std::string::npos);
      } else {
        // The tensor whose bytes these are, named.
        std::string name;
        for (const auto& e : h.tensors)
          if (i - 8 - n >= e.begin && i - 8 - n < e.end) name = e.name;
        CHECK(what.find("tensor \"" + name + "\" is damaged") != std::string::npos);
      }
      ++cases;
    }
  for (std::size_t size = 0; size < good.size(); ++size) {
    const std::string what = refused(good.substr(0, size));
    CAPTURE(size);
    CHECK(what != "loaded");
    ++cases;
  }
  CHECK(cases == static_cast<int>(4 * good.size()));
  CHECK(test::parameters(b.m) == w);  // nothing loaded, ever
  CHECK(state_of(b.opt) == st);
  CHECK(b.opt.updates() == 2);
  write_bytes(bad, good);
  CHECK(ctpipe::load_checkpoint(bad, b.opt).data == "data");  // the undamaged bytes load
  CHECK(test::parameters(b.m) == test::parameters(a.m));
}

TEST_CASE("checkpoint: a file without checksums loads only when asked, and is checked where it has them") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "a.safetensors", bare = tmp / "bare.safetensors";
  ctpipe::save_checkpoint(file, a.opt, {{5, 0}, "bare"});
  const std::string good = read_bytes(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(good[static_cast<std::size_t>(i)]);
  ctpipe::safetensors::header h = ctpipe::safetensors::read_header(good.substr(8, n), good.size() - 8 - n);
  CHECK(h.metadata.at("ctpipe.checkpoint") == "2");
  CHECK(h.metadata.at("ctpipe.header_crc32").size() == 8);
  CHECK(h.metadata.at("ctpipe.crc32.layers.0.weight") ==
        ctpipe::safetensors::checksum_text(ctpipe::safetensors::crc32(
            std::string_view(good).substr(8 + n + h.tensors[0].begin, h.tensors[0].end - h.tensors[0].begin))));
  // What numpy or another tool writes: the same tensors, no checksums.
  std::erase_if(h.metadata, [](const auto& kv) {
    return kv.first.starts_with("ctpipe.crc32.") || kv.first == "ctpipe.header_crc32";
  });
  const std::string head = ctpipe::safetensors::write_header(h);
  std::string bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>(head.size() >> (8 * i));
  bytes += head + good.substr(8 + n);
  write_bytes(bare, bytes);
  trained b;
  ctpipe::for_each_parameter(b.m, [](auto w, auto) {
    for (float& x : w) x += 1.0f;
  });
  expect_refused(bare, b.m, b.opt, "it has no checksums (\"ctpipe.header_crc32\" is not in its metadata)");
  CHECK(ctpipe::load_checkpoint(bare, b.opt, ctpipe::checksums::optional).data == "bare");
  CHECK(test::parameters(b.m) == test::parameters(a.m));
  // A file with checksums is checked all the same under checksums::optional.
  std::string damaged = good;
  damaged.back() = static_cast<char>(damaged.back() ^ 1);
  write_bytes(bare, damaged);
  models::tied m;
  ctpipe::optimizer opt(m, ctpipe::adamw{});
  CHECK_THROWS_WITH_AS((void)ctpipe::load_checkpoint(bare, opt, ctpipe::checksums::optional),
                       doctest::Contains("is damaged: its checksum is "), ctpipe::checkpoint_error);
  // load_parameters checks the header and the tensors it reads (not the optimizer's).
  CHECK_NOTHROW(ctpipe::load_parameters(bare, m));
  damaged = good;
  damaged[8 + n + h.tensors[0].begin] ^= 1;
  write_bytes(bare, damaged);
  CHECK_THROWS_WITH_AS(ctpipe::load_parameters(bare, m, ctpipe::checksums::optional),
                       doctest::Contains("tensor \"layers.0.weight\" is damaged: its checksum is "),
                       ctpipe::checkpoint_error);
}

TEST_CASE("checkpoint: a save that fails leaves the last good checkpoint as it was") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "a.safetensors";
  ctpipe::save_checkpoint(file, a.opt, {{1, 0}, "good"});
  const auto before = fs::file_size(file);
  fs::create_directory(file + ".tmp");  // where the new one would be written: it cannot be
  ctpipe::for_each_parameter(a.m, [](auto w, auto) {
    for (float& x : w) x = 9.0f;
  });
  CHECK_THROWS_AS(ctpipe::save_checkpoint(file, a.opt, {{2, 0}, "bad"}), ctpipe::checkpoint_error);
  CHECK(fs::file_size(file) == before);
  models::tied m;
  ctpipe::optimizer opt(m, ctpipe::adamw{});
  CHECK(ctpipe::load_checkpoint(file, opt).data == "good");
  CHECK(m.layer<0>().params[0] != 9.0f);
}

TEST_CASE("checkpoint: parameters alone, saved and loaded without an optimizer") {
  scratch tmp;
  trained a;
  const std::string file = tmp / "weights.safetensors";
  ctpipe::save_parameters(file, a.m);
  models::tied m;
  ctpipe::load_parameters(file, m);
  CHECK(test::parameters(m) == test::parameters(a.m));
  ctpipe::optimizer opt(m, ctpipe::adamw{});
  try {
    (void)ctpipe::load_checkpoint(file, opt);
    FAIL("loaded optimizer state from a file of parameters");
  } catch (const ctpipe::checkpoint_error& e) {
    CHECK(std::string(e.what()).find("is not in the file") != std::string::npos);
  }
}

TEST_CASE("checkpoint: numpy reads a ctpipe checkpoint, and ctpipe reads what numpy wrote back") {
#ifdef CTPIPE_TEST_PYTHON
  scratch tmp;
  trained a;
  const std::string in = tmp / "ctpipe.safetensors", out = tmp / "numpy.safetensors";
  ctpipe::save_checkpoint(in, a.opt, {{7, 0}, "epoch 1"});
  const std::string cmd = std::string(CTPIPE_TEST_PYTHON) + " " + CTPIPE_TEST_SOURCE_DIR +
                          "/tests/tools/checkpoint_numpy.py " + in + " " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  models::tied m;
  ctpipe::optimizer opt(m, ctpipe::adamw{});
  const ctpipe::training_state s = ctpipe::load_checkpoint(out, opt);
  CHECK(s.data == "from numpy");
  CHECK(s.origin.step == 7);
  const std::vector<float> w = test::parameters(a.m), doubled = test::parameters(m);
  REQUIRE(w.size() == doubled.size());
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(doubled[i] == 2.0f * w[i]);
  CHECK(state_of(opt) == state_of(a.opt));
#else
  MESSAGE("no python3 with numpy was found at configure time: scripts/setup.sh installs python3-numpy");
  FAIL("the numpy round trip cannot run");
#endif
}
