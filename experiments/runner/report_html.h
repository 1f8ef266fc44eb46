// The HTML report (report_html.cpp): one self-contained page with charts.
#pragma once

#include <string>

#include "report.h"

namespace lazylab {

std::string render_html(const ExperimentResult& result, const RunInfo& info);

}  // namespace lazylab
