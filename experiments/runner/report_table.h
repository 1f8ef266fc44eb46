// A report table described once, as columns (heading, CSV name, where it
// shows, how to read its value from a row), and rendered from that one
// description as a console table, a Markdown table or CSV. Adding a column
// to every format is one line in report_tables.cpp.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace lazylab {

enum class ReportFormat { Console, Markdown, Csv, Html };

// Where a column shows; a bit set. HTML tables show the Markdown columns.
enum ShownIn : unsigned { kConsole = 1, kMarkdown = 2, kCsv = 4, kPeople = kConsole | kMarkdown, kEverywhere = 7 };

// A value as people read it (`text`: rounded, with units folded into the
// heading) and as programs read it (`raw`: full precision; empty means the
// same as `text`).
struct ReportValue {
  std::string text, raw;
};

ReportValue report_number(double value, int decimals);
ReportValue report_count(uint64_t value);
inline ReportValue report_text(std::string text) { return {std::move(text), {}}; }
// Text safe inside HTML elements and quoted attributes.
std::string html_escape(const std::string& text);

template <class Row>
struct ReportColumn {
  std::string heading;   // console and Markdown
  std::string csv_name;  // the CSV header; a column shown in CSV needs one
  unsigned shown_in = kEverywhere;
  bool numeric = false;  // right-aligned
  std::function<ReportValue(const Row&)> value;
  // Left out of the tables people read where every row leaves it blank (a
  // figure only some runs measure); CSV keeps it, so its header is stable.
  bool hidden_when_blank = false;
};

// The pieces every table shares, independent of the row type.
namespace report_table_detail {
struct Grid {
  std::vector<std::string> headings;
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;
};
std::string render(const Grid& grid, ReportFormat format);
bool shown(unsigned shown_in, ReportFormat format);
bool blank_column(const Grid& grid, size_t column);
void drop_column(Grid& grid, size_t column);
}  // namespace report_table_detail

template <class Row>
std::string render_table(const std::vector<ReportColumn<Row>>& columns, const std::vector<const Row*>& rows,
                         ReportFormat format) {
  report_table_detail::Grid grid;
  std::vector<const ReportColumn<Row>*> chosen;
  for (const ReportColumn<Row>& column : columns)
    if (report_table_detail::shown(column.shown_in, format)) {
      chosen.push_back(&column);
      grid.headings.push_back(format == ReportFormat::Csv ? column.csv_name : column.heading);
      grid.numeric.push_back(column.numeric);
    }
  for (const Row* row : rows) {
    std::vector<std::string>& line = grid.rows.emplace_back();
    for (const ReportColumn<Row>* column : chosen) {
      ReportValue value = column->value(*row);
      line.push_back(format == ReportFormat::Csv && !value.raw.empty() ? std::move(value.raw) : std::move(value.text));
    }
  }
  if (format != ReportFormat::Csv)
    for (size_t c = chosen.size(); c-- > 0;)
      if (chosen[c]->hidden_when_blank && report_table_detail::blank_column(grid, c))
        report_table_detail::drop_column(grid, c);
  return report_table_detail::render(grid, format);
}

}  // namespace lazylab
