#include "report_table.h"

#include <fmt/format.h>

namespace lazylab {

ReportValue report_number(double value, int decimals) {
  return {fmt::format("{:.{}f}", value, decimals), fmt::format("{}", value)};
}

ReportValue report_count(uint64_t value) { return {std::to_string(value), {}}; }

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  return out;
}

namespace report_table_detail {
namespace {

// Display columns of UTF-8 text (µ, →): one per code point.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& text, size_t width, bool right) {
  std::string fill(width - std::min(width, display_width(text)), ' ');
  return right ? fill + text : text + fill;
}

std::string console(const Grid& grid) {
  std::vector<size_t> widths;
  for (const std::string& heading : grid.headings) widths.push_back(display_width(heading));
  for (const auto& row : grid.rows)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      bool last = i + 1 == cells.size();
      out += last && !grid.numeric[i] ? cells[i] : pad(cells[i], widths[i], grid.numeric[i]);
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(grid.headings);
  for (const auto& row : grid.rows) out += line(row);
  return out;
}

// Text in a Markdown table cell: a bar would end the cell, a newline the row.
std::string markdown_cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string markdown(const Grid& grid) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const std::string& cell : cells) {
      out += ' ';
      out += markdown_cell(cell);
      out += " |";
    }
    return out + "\n";
  };
  std::string out = line(grid.headings) + "|";
  for (bool numeric : grid.numeric) out += numeric ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : grid.rows) out += line(row);
  return out;
}

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes
// doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv(const Grid& grid) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      out += csv_field(cells[i]);
    }
    return out + "\r\n";
  };
  std::string out = line(grid.headings);
  for (const auto& row : grid.rows) out += line(row);
  return out;
}

std::string html(const Grid& grid) {
  auto row = [&](const std::vector<std::string>& cells, const char* tag) {
    std::string out = "<tr>";
    for (size_t i = 0; i < cells.size(); ++i)
      out += fmt::format("<{0}{1}>{2}</{0}>", tag, grid.numeric[i] ? " class=\"num\"" : "", html_escape(cells[i]));
    return out + "</tr>\n";
  };
  std::string out = "<table>\n<thead>" + row(grid.headings, "th") + "</thead>\n<tbody>\n";
  for (const auto& cells : grid.rows) out += row(cells, "td");
  return out + "</tbody>\n</table>\n";
}

}  // namespace

bool shown(unsigned shown_in, ReportFormat format) {
  switch (format) {
    case ReportFormat::Console: return shown_in & kConsole;
    case ReportFormat::Markdown:
    case ReportFormat::Html: return shown_in & kMarkdown;
    case ReportFormat::Csv: return shown_in & kCsv;
  }
  return false;
}

bool blank_column(const Grid& grid, size_t column) {
  return std::all_of(grid.rows.begin(), grid.rows.end(),
                     [&](const std::vector<std::string>& row) { return row[column].empty(); });
}

void drop_column(Grid& grid, size_t column) {
  auto at = [column](auto& list) { return list.begin() + static_cast<std::ptrdiff_t>(column); };
  grid.headings.erase(at(grid.headings));
  grid.numeric.erase(at(grid.numeric));
  for (std::vector<std::string>& row : grid.rows) row.erase(at(row));
}

std::string render(const Grid& grid, ReportFormat format) {
  switch (format) {
    case ReportFormat::Console: return console(grid);
    case ReportFormat::Markdown: return markdown(grid);
    case ReportFormat::Csv: return csv(grid);
    case ReportFormat::Html: return html(grid);
  }
  return "";
}

}  // namespace report_table_detail
}  // namespace lazylab
