// The test programs' precompiled headers (cmake/ctpipe_testing.cmake, CTPIPE_TEST_PCH) are built
// with this source, which needs nothing else.
