// Boost.Program_options glue shared by the subcommands.
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "commands.h"

namespace lazylab::cli {

namespace po = boost::program_options;

// Parses `args`; on --help prints usage and returns kExitOk, on a usage
// error prints it and returns kExitUsage; otherwise nullopt.
inline std::optional<int> parse_args(const Args& args, const char* usage, po::options_description& options,
                                     const po::positional_options_description& positional, po::variables_map& vm) {
  options.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << options << "\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "lazylab: " << e.what() << "\n" << usage << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace lazylab::cli
