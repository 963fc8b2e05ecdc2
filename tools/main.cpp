// ctpipe: the schedule explorer. See `ctpipe --help`.
#include <iostream>

#include "explorer.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return ctpipe::explorer::run(args, std::cout, std::cerr);
}
