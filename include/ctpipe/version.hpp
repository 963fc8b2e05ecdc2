// ctpipe: the one place the version lives; CMake reads it from here.
#pragma once

#define CTPIPE_VERSION_MAJOR 0
#define CTPIPE_VERSION_MINOR 1
#define CTPIPE_VERSION_PATCH 0

namespace ctpipe {
inline constexpr int version_major = CTPIPE_VERSION_MAJOR;
inline constexpr int version_minor = CTPIPE_VERSION_MINOR;
inline constexpr int version_patch = CTPIPE_VERSION_PATCH;
inline constexpr const char* version_string = "0.1.0";
}  // namespace ctpipe
