#include <doctest/doctest.h>
#include <ctpipe/version.hpp>

#include <string>

TEST_CASE("the version in the header is the one CMake read") {
  const std::string v = std::to_string(ctpipe::version_major) + "." + std::to_string(ctpipe::version_minor) + "." +
                        std::to_string(ctpipe::version_patch);
  CHECK(v == CTPIPE_CMAKE_VERSION);
  CHECK(v == ctpipe::version_string);
}
