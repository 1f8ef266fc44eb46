// lazylab report RUN.json: renders a finished run again, in any format,
// without running anything.
#include <fmt/format.h>

#include <iostream>

#include "options.h"
#include "runner/report.h"

namespace lazylab::cli {

int report_command(const Args& args) {
  po::options_description options("lazylab report options");
  std::string input, format_name, output;
  options.add_options()("report", po::value(&input)->required(), "a JSON report written by lazylab run or merge")(
      "format,f", po::value(&format_name)->default_value("console"), "console, md (Markdown), csv or html")(
      "output,o", po::value(&output), "write to this file instead of standard output");
  po::positional_options_description positional;
  positional.add("report", 1);
  po::variables_map vm;
  if (auto exit = parse_args(args, "usage: lazylab report RUN.json [--format console|md|csv|html] [-o FILE]", options,
                             positional, vm))
    return *exit;
  auto format = parse_report_format(format_name);
  if (!format) {
    std::cerr << "lazylab: " << format.error().message << "\n";
    return kExitUsage;
  }
  auto report = load_report(input);
  if (!report) {
    std::cerr << "lazylab: " << report.error().message << "\n";
    return kExitError;
  }
  std::string text = render_report(*report, *format);
  if (output.empty()) {
    std::cout << text;
    return kExitOk;
  }
  if (Status written = write_file_atomically(output, text); !written) {
    std::cerr << "lazylab: " << written.error().message << "\n";
    return kExitError;
  }
  std::cout << "wrote " << output << "\n";
  return kExitOk;
}

}  // namespace lazylab::cli
