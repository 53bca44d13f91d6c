#include "runtime/tokenizer/llama3_split.h"

#include "runtime/tokenizer/unicode_classes.h"
#include "runtime/tokenizer/utf8.h"

namespace atl::runtime {
namespace {

struct Char {
  char32_t value;
  size_t bytes;
  UnicodeClass unicode_class;
  bool letter() const { return unicode_class == UnicodeClass::kLetter; }
  bool number() const { return unicode_class == UnicodeClass::kNumber; }
  bool space() const { return unicode_class == UnicodeClass::kWhitespace; }
  bool other() const { return unicode_class == UnicodeClass::kOther; }
  bool newline() const { return value == '\r' || value == '\n'; }
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}
  bool at_end(size_t at) const { return at >= text_.size(); }
  Char at(size_t at) const {
    const CodePoint c = code_point_at(text_, at);
    return {c.value, c.bytes, unicode_class(c.value)};
  }
  // The end of the run of characters from `from` that satisfy `in_run`.
  template <typename Predicate>
  size_t run(size_t from, Predicate in_run) const {
    while (!at_end(from)) {
      const Char c = at(from);
      if (!in_run(c)) break;
      from += c.bytes;
    }
    return from;
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at `start`: the match's end, or 0. Case-
  // insensitive as Unicode folds case: 'ſ' (U+017F) is an 's'.
  size_t contraction(size_t start) const {
    const size_t first = start + 1;
    if (at_end(first)) return 0;
    const Char c1 = at(first);
    const char32_t l1 = lower(c1.value);
    if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return first + c1.bytes;
    const size_t second = first + c1.bytes;
    if (at_end(second)) return 0;
    const Char c2 = at(second);
    const char32_t l2 = lower(c2.value);
    if ((l1 == 'r' && l2 == 'e') || (l1 == 'v' && l2 == 'e') || (l1 == 'l' && l2 == 'l'))
      return second + c2.bytes;
    return 0;
  }

 private:
  static char32_t lower(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
    if (c == U'\u017F') return 's';
    return c;
  }
  std::string_view text_;
};

}  // namespace

size_t llama3_piece_end(std::string_view text, size_t start) {
  const Scanner s(text);
  const Char first = s.at(start);
  const size_t second = start + first.bytes;
  const auto letter = [](const Char& c) { return c.letter(); };
  const auto other = [](const Char& c) { return c.other(); };
  const auto space = [](const Char& c) { return c.space(); };

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (first.value == '\'')
    if (const size_t end = s.contraction(start)) return end;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (first.letter()) return s.run(second, letter);
  if (!first.newline() && !first.number() && !s.at_end(second) && s.at(second).letter())
    return s.run(second, letter);
  // \p{N}{1,3}
  if (first.number()) {
    size_t end = second;
    for (int n = 1; n < 3 && !s.at_end(end) && s.at(end).number(); ++n) end += s.at(end).bytes;
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t others = first.value == ' ' ? second : start;
  if (!s.at_end(others) && s.at(others).other())
    return s.run(s.run(others, other), [](const Char& c) { return c.newline(); });
  // Only whitespace is left: first is \s.
  // \s*[\r\n]+ : up to the run's last newline.
  size_t last_newline_end = 0;
  size_t last_start = start;
  size_t end = start;
  while (!s.at_end(end)) {
    const Char c = s.at(end);
    if (!space(c)) break;
    last_start = end;
    end += c.bytes;
    if (c.newline()) last_newline_end = end;
  }
  if (last_newline_end != 0) return last_newline_end;
  // \s+(?!\S) : the run, less its last character when text follows; else \s+ : the run.
  if (s.at_end(end) || last_start == start) return end;
  return last_start;
}

std::vector<std::string_view> llama3_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t end = llama3_piece_end(text, start);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

}  // namespace atl::runtime
