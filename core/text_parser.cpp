// Recursive-descent parser for .lzir; every error names line and column.
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/text_format.h"

namespace lazylab {
namespace {

enum class TokenKind { End, Ident, Value, Global, Number, Punct };

struct Token {
  TokenKind kind = TokenKind::End;
  std::string_view text;
  int line = 0, column = 0;
};

class Lexer {
 public:
  Lexer(std::string_view text, int first_line) : text_(text), line_(first_line) {}

  Token next() {
    skip_space_and_comments();
    Token token{TokenKind::End, {}, line_, column()};
    if (pos_ >= text_.size()) return token;
    size_t start = pos_;
    char c = text_[pos_];
    if (c == '%' || c == '@') {
      ++pos_;
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
      token.kind = c == '%' ? TokenKind::Value : TokenKind::Global;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
      token.kind = TokenKind::Ident;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      ++pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' || is_exponent_sign()))
        ++pos_;
      token.kind = TokenKind::Number;
    } else {
      ++pos_;
      token.kind = TokenKind::Punct;
    }
    token.text = text_.substr(start, pos_ - start);
    return token;
  }

 private:
  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  }
  bool is_exponent_sign() const {
    return (text_[pos_] == '-' || text_[pos_] == '+') && pos_ > 0 && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
  }
  int column() const { return static_cast<int>(pos_ - line_start_) + 1; }
  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0, line_start_ = 0;
  int line_;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, int first_line) : lexer_(text, first_line), source_(source) {
    advance();
  }

  Expected<NamedGraph> parse() {
    NamedGraph result;
    LAZYLAB_TRY(expect_ident("graph"));
    if (token_.kind != TokenKind::Global) return error("expected a graph name like @main");
    result.name = std::string(token_.text.substr(1));
    advance();
    LAZYLAB_TRY(expect_punct("{"));
    while (!(token_.kind == TokenKind::Ident && token_.text == "return")) {
      if (token_.kind == TokenKind::End) return error("unexpected end of input inside graph");
      LAZYLAB_TRY(parse_node(result.graph));
    }
    advance();
    std::vector<NodeId> roots;
    do {
      auto id = parse_operand();
      if (!id) return id.error();
      roots.push_back(*id);
    } while (accept_punct(","));
    result.graph.set_roots(std::move(roots));
    LAZYLAB_TRY(expect_punct("}"));
    if (token_.kind != TokenKind::End) return error("unexpected text after the graph");
    LAZYLAB_TRY(check_ordinals_dense());
    return result;
  }

 private:
  void advance() { token_ = lexer_.next(); }

  Error error(const std::string& what) const { return error_at(token_, what); }
  Error error_at(const Token& at, const std::string& what) const {
    return make_error(fmt::format("{}:{}:{}: {}", source_, at.line, at.column, what));
  }

  std::string describe(const Token& token) const {
    return token.kind == TokenKind::End ? "end of input" : fmt::format("'{}'", token.text);
  }

  bool accept_punct(std::string_view punct) {
    if (token_.kind != TokenKind::Punct || token_.text != punct) return false;
    advance();
    return true;
  }
  Status expect_punct(std::string_view punct) {
    if (accept_punct(punct)) return {};
    return error(fmt::format("expected '{}', found {}", punct, describe(token_)));
  }
  Status expect_ident(std::string_view ident) {
    if (token_.kind != TokenKind::Ident || token_.text != ident)
      return error(fmt::format("expected '{}', found {}", ident, describe(token_)));
    advance();
    return {};
  }

  Expected<NodeId> parse_operand() {
    if (token_.kind != TokenKind::Value)
      return error(fmt::format("expected a value like %0, found {}", describe(token_)));
    auto it = names_.find(std::string(token_.text));
    if (it == names_.end()) return error(fmt::format("use of undefined value {}", token_.text));
    advance();
    return it->second;
  }

  Expected<int64_t> parse_int() {
    int64_t value = 0;
    auto [end, ec] = std::from_chars(token_.text.data(), token_.text.data() + token_.text.size(), value);
    if (token_.kind != TokenKind::Number || ec != std::errc() || end != token_.text.data() + token_.text.size())
      return error(fmt::format("expected an integer, found {}", describe(token_)));
    advance();
    return value;
  }

  Expected<double> parse_float() {
    auto value = float_of(token_);
    if (!value) return error(fmt::format("expected a number, found {}", describe(token_)));
    advance();
    return *value;
  }

  static std::optional<double> float_of(const Token& token) {
    std::string text(token.text);
    if (token.kind == TokenKind::Ident && (text == "inf" || text == "nan")) return text == "inf" ? INFINITY : NAN;
    if (text == "-inf" || text == "+inf") return text[0] == '-' ? -INFINITY : INFINITY;
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    if (token.kind != TokenKind::Number || end != text.c_str() + text.size()) return std::nullopt;
    return value;
  }

  // A scalar attribute's token, read once the node's dtype is known: an
  // integer or bool exactly (a float spelling of an integer of the dtype, as
  // earlier printers wrote 1e+16, is taken too), a float as parse_float.
  Status resolve_scalar(const Token& token, DType dtype, AttrValue& value) const {
    if (is_float(dtype)) {
      auto parsed = float_of(token);
      if (!parsed) return error_at(token, fmt::format("expected a number, found {}", describe(token)));
      value = scalar_attr(dtype, *parsed);
      return {};
    }
    int64_t integer = 0;
    auto [end, ec] = std::from_chars(token.text.data(), token.text.data() + token.text.size(), integer);
    bool exact = token.kind == TokenKind::Number && ec == std::errc() && end == token.text.data() + token.text.size();
    if (!exact) {
      auto parsed = float_of(token);
      if (token.kind == TokenKind::Ident && (token.text == "true" || token.text == "false") && dtype == DType::Bool)
        integer = token.text == "true", exact = true;
      else if (parsed && *parsed == std::trunc(*parsed) && *parsed >= -0x1p63 && *parsed < 0x1p63)
        integer = static_cast<int64_t>(*parsed), exact = true;
    }
    value = integer_scalar_attr(dtype, integer);
    if (!exact || value.i != integer)
      return error_at(token, fmt::format("expected a value of {}, found {}", dtype_name(dtype), describe(token)));
    return {};
  }

  Expected<Ints> parse_int_list() {
    Ints values;
    LAZYLAB_TRY(expect_punct("["));
    if (accept_punct("]")) return values;
    do {
      auto value = parse_int();
      if (!value) return value.error();
      values.push_back(*value);
    } while (accept_punct(","));
    LAZYLAB_TRY(expect_punct("]"));
    return values;
  }

  Status parse_attr_value(AttrKind kind, AttrValue& value) {
    switch (kind) {
      case AttrKind::Int: {
        auto parsed = parse_int();
        if (!parsed) return parsed.error();
        value.i = *parsed;
        return {};
      }
      case AttrKind::Bool:
        if (token_.kind != TokenKind::Ident || (token_.text != "true" && token_.text != "false"))
          return error(fmt::format("expected true or false, found {}", describe(token_)));
        value.i = token_.text == "true";
        advance();
        return {};
      case AttrKind::Float: {
        auto parsed = parse_float();
        if (!parsed) return parsed.error();
        value.f = *parsed;
        return {};
      }
      case AttrKind::Ints: {
        auto parsed = parse_int_list();
        if (!parsed) return parsed.error();
        value.ints = std::move(*parsed);
        return {};
      }
      case AttrKind::Scalar: return {};  // parse_attrs reads it after the type
    }
    return {};
  }

  struct ScalarToken {
    int index;
    Token token;
  };

  Status parse_attrs(OpId op, Attrs& attrs, std::vector<ScalarToken>& scalars) {
    const OpInfo& info = op_info(op);
    std::vector<bool> seen(info.num_attrs);
    if (accept_punct("{")) {
      do {
        Token name = token_;
        if (name.kind != TokenKind::Ident) return error("expected an attribute name");
        auto index = attr_index(op, name.text);
        if (!index) return error(fmt::format("op '{}' has no attribute '{}'", info.name, name.text));
        if (seen[*index]) return error(fmt::format("attribute '{}' given twice", name.text));
        seen[*index] = true;
        advance();
        LAZYLAB_TRY(expect_punct("="));
        if (info.attrs[*index].kind == AttrKind::Scalar) {  // read once the type says its dtype
          scalars.push_back({*index, token_});
          advance();
          continue;
        }
        LAZYLAB_TRY(parse_attr_value(info.attrs[*index].kind, attrs[*index]));
      } while (accept_punct(","));
      LAZYLAB_TRY(expect_punct("}"));
    }
    for (int a = 0; a < info.num_attrs; ++a)
      if (!seen[a]) return error(fmt::format("op '{}' needs attribute '{}'", info.name, info.attrs[a].name));
    return {};
  }

  Expected<TensorType> parse_type() {
    if (token_.kind != TokenKind::Ident) return error("expected a type like f32[4,8]");
    auto dtype = parse_dtype(token_.text);
    if (!dtype) return error(fmt::format("unknown dtype '{}'", token_.text));
    advance();
    auto dims = parse_int_list();
    if (!dims) return dims.error();
    return TensorType{*dtype, Dims(dims->begin(), dims->end())};
  }

  Status parse_node(Graph& graph) {
    Token result = token_;
    if (result.kind != TokenKind::Value) return error("expected a value definition like %0 = ...");
    if (names_.count(std::string(result.text))) return error(fmt::format("value {} defined twice", result.text));
    advance();
    LAZYLAB_TRY(expect_punct("="));
    Token op_token = token_;
    auto op = token_.kind == TokenKind::Ident ? find_op(token_.text) : std::nullopt;
    if (!op) return error(fmt::format("unknown op {}", describe(token_)));
    advance();
    Operands operands;
    if (accept_punct("(")) {
      do {
        auto id = parse_operand();
        if (!id) return id.error();
        operands.push_back(*id);
      } while (accept_punct(","));
      LAZYLAB_TRY(expect_punct(")"));
    }
    Attrs attrs;
    std::vector<ScalarToken> scalars;
    LAZYLAB_TRY(parse_attrs(*op, attrs, scalars));
    LAZYLAB_TRY(expect_punct(":"));
    auto declared = parse_type();
    if (!declared) return declared.error();
    for (const ScalarToken& scalar : scalars)
      LAZYLAB_TRY(resolve_scalar(scalar.token, declared->dtype, attrs[scalar.index]));
    boost::container::small_vector<const TensorType*, 3> operand_types;
    for (NodeId id : operands) operand_types.push_back(&graph.node(id).type);
    auto type = infer_type(*op, std::span(operand_types.data(), operand_types.size()), attrs, &*declared);
    if (!type) return error_at(op_token, type.error().message);
    if (*op == OpId::Parameter) LAZYLAB_TRY(record_parameter(attrs[0].i, op_token));
    names_.emplace(std::string(result.text), graph.add(*op, *type, operands, attrs));
    return {};
  }

  // Ordinals are dense and unique (the verifier's rule), checked here so the
  // error names the line.
  Status record_parameter(int64_t ordinal, const Token& at) {
    if (ordinal < 0) return error_at(at, fmt::format("parameter ordinal {} is negative", ordinal));
    auto [it, inserted] = ordinals_.emplace(ordinal, at.line);
    if (!inserted)
      return error_at(at, fmt::format("parameter ordinal {} is also used on line {}", ordinal, it->second));
    return {};
  }
  Status check_ordinals_dense() const {
    int64_t expected = 0;
    for (auto [ordinal, line] : ordinals_) {
      if (ordinal != expected)
        return make_error(
            fmt::format("{}:{}: parameter ordinal {}, but no parameter has ordinal {} (ordinals are "
                        "0..{} without gaps)",
                        source_, line, ordinal, expected, ordinals_.size() - 1));
      ++expected;
    }
    return {};
  }

  Lexer lexer_;
  std::string_view source_;
  Token token_;
  std::unordered_map<std::string, NodeId> names_;
  std::map<int64_t, int> ordinals_;  // parameter ordinal -> line
};

}  // namespace

Expected<NamedGraph> parse_graph(std::string_view text, std::string_view source, int first_line) {
  return Parser(text, source, first_line).parse();
}

}  // namespace lazylab
