#include "runtime/data/html_text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

namespace atl::runtime {
namespace {

// What an element does to the text.
enum ElementFlag : uint8_t {
  kSkip = 1,       // its subtree is dropped
  kLine = 2,       // ends the current line, where it opens and where it closes
  kParagraph = 4,  // leaves a blank line (with kLine)
  kPre = 8,        // whitespace inside is kept as written
  kRawText = 16,   // its contents are not markup (script, style, textarea): skipped to its end tag
  kVoid = 32,      // never has contents or an end tag
  kCell = 64,      // a table cell: set a space apart from its neighbours
};
constexpr uint8_t kBlock = kLine | kParagraph;

struct Element {
  std::string_view name;  // lower case
  uint8_t flags;
};

// Sorted by name; elements not listed (a, span, code, em, tbody, ...) are inline and change nothing.
constexpr Element kElements[] = {
    {"address", kLine},
    {"area", kVoid},
    {"article", kLine},
    {"aside", kLine},
    {"base", kVoid},
    {"blockquote", kBlock},
    {"br", kLine | kVoid},
    {"button", kSkip},
    {"caption", kLine},
    {"col", kVoid},
    {"dd", kLine},
    {"details", kLine},
    {"div", kLine},
    {"dl", kBlock},
    {"dt", kLine},
    {"embed", kVoid},
    {"fieldset", kLine},
    {"figcaption", kLine},
    {"figure", kLine},
    {"footer", kSkip | kLine},
    {"form", kSkip | kLine},
    {"h1", kBlock},
    {"h2", kBlock},
    {"h3", kBlock},
    {"h4", kBlock},
    {"h5", kBlock},
    {"h6", kBlock},
    {"head", kSkip | kLine},
    {"header", kSkip | kLine},
    {"hr", kLine | kVoid},
    {"iframe", kSkip},
    {"img", kVoid},
    {"input", kVoid},
    {"li", kLine},
    {"link", kVoid},
    {"main", kLine},
    {"meta", kVoid},
    {"nav", kSkip | kLine},
    {"noscript", kSkip},
    {"ol", kBlock},
    {"p", kBlock},
    {"param", kVoid},
    {"pre", kBlock | kPre},
    {"script", kSkip | kRawText},
    {"section", kBlock},
    {"source", kVoid},
    {"style", kSkip | kRawText},
    {"summary", kLine},
    {"svg", kSkip},
    {"table", kBlock},
    {"td", kCell},
    {"template", kSkip},
    {"textarea", kSkip | kRawText},
    {"th", kCell},
    {"title", kLine},
    {"tr", kLine},
    {"track", kVoid},
    {"ul", kBlock},
    {"wbr", kVoid},
};
static_assert(std::is_sorted(std::begin(kElements), std::end(kElements),
                             [](const Element& a, const Element& b) { return a.name < b.name; }));

struct Entity {
  std::string_view name;  // as written between & and ;
  uint32_t codepoint;
};

// Sorted by name (byte order: upper case first). U+00A0 becomes a space, U+00AD and U+200B nothing.
constexpr Entity kEntities[] = {
    {"AMP", '&'},      {"GT", '>'},       {"LT", '<'},       {"QUOT", '"'},     {"ZeroWidthSpace", 0x200B},
    {"amp", '&'},      {"apos", '\''},    {"bull", 0x2022},  {"copy", 0xA9},    {"darr", 0x2193},
    {"deg", 0xB0},     {"ge", 0x2265},    {"gt", '>'},       {"harr", 0x2194},  {"hellip", 0x2026},
    {"laquo", 0xAB},   {"larr", 0x2190},  {"ldquo", 0x201C}, {"le", 0x2264},    {"lsquo", 0x2018},
    {"lt", '<'},       {"mdash", 0x2014}, {"middot", 0xB7},  {"minus", 0x2212}, {"nbsp", 0xA0},
    {"ndash", 0x2013}, {"ne", 0x2260},    {"para", 0xB6},    {"plusmn", 0xB1},  {"quot", '"'},
    {"raquo", 0xBB},   {"rarr", 0x2192},  {"rdquo", 0x201D}, {"reg", 0xAE},     {"rsquo", 0x2019},
    {"sect", 0xA7},    {"shy", 0xAD},     {"times", 0xD7},   {"trade", 0x2122}, {"uarr", 0x2191},
    {"zwsp", 0x200B},
};
static_assert(std::is_sorted(std::begin(kEntities), std::end(kEntities),
                             [](const Entity& a, const Entity& b) { return a.name < b.name; }));

// Numeric references to 0x80-0x9F mean Windows-1252 (the HTML standard's table); 0: unchanged.
constexpr uint16_t kWindows1252[32] = {0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                                       0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0,      0x017D, 0,
                                       0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                                       0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};

constexpr bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
constexpr bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
// Tag names: letters, digits, '-', ':', '_' (custom elements, namespaced XHTML).
constexpr bool is_name_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == ':' || c == '_';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

bool istarts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

uint8_t flags_of(std::string_view lower_name) {
  const auto it = std::lower_bound(std::begin(kElements), std::end(kElements), lower_name,
                                   [](const Element& e, std::string_view name) { return e.name < name; });
  return it != std::end(kElements) && it->name == lower_name ? it->flags : 0;
}

// Classes that mark a generator's page furniture rather than content; sorted.
constexpr std::string_view kSkippedClasses[] = {
    "boring",               // mdBook: example lines the reader sees only on request (fn main() {)
    "docnav",               // Publican (the Debian Handbook): "Prev Up Home Next"
    "footer",               // Sphinx (a div, not <footer>): copyright, "Created using Sphinx"
    "headerlink",           // Sphinx: the permalink after every heading
    "hideme",               // rustdoc: "Expand description"
    "leftside",             // LibreOffice help: the index and search column
    "linenos",              // Sphinx (Pygments): the column of line numbers beside code
    "mark",                 // Node.js: the "#" permalink after every heading
    "menu-bar",             // mdBook: the bar with the book's title and the buttons
    "mobile-nav-chapters",  // mdBook: previous/next arrows
    "nav-chapters",         // mdBook
    "nav-panel",            // texinfo 7: "Next: ..., Previous: ..., Up: ..."
    "navfooter",            // DocBook (PostgreSQL, GIMP): "Prev Up Next" tables
    "navheader",            // DocBook
    "navigationbar",        // qdoc: "Qt 5.15 > Qt Core > C++ Classes > ..."
    "notable-traits",       // rustdoc: the "Notable traits for ..." tooltip
    "out-of-band",          // rustdoc: "1.0.0 · source · [-]"
    "related",              // Sphinx: the "index modules next previous" bar
    "rightside",            // rustdoc: "since" and "source" beside each item; LibreOffice: contents
    "sphinxsidebar",        // Sphinx: contents, "Quick search"
    "srclink",              // rustdoc: "source"
    "test-arrow",           // rustdoc: the "Run" link to the playground under each example
    "toc",                  // qdoc: the page's own contents, repeated from its headings
};
static_assert(std::is_sorted(std::begin(kSkippedClasses), std::end(kSkippedClasses)));

// Whole class attributes that mark furniture where one of their words alone would not: rustdoc's
// column of line numbers beside source code is class="line-numbers", while Prism.js (LibreOffice
// help) puts "line-numbers" beside "language-..." on the code itself.
constexpr std::string_view kSkippedClassValues[] = {"line-numbers"};

// Ids of generated sections that are the same on every page of their kind; sorted.
constexpr std::string_view kSkippedIds[] = {
    "blanket-implementations",         // rustdoc: impl<T> Any for T, From<T> for T, ... on every type
    "blanket-implementations-list",    //
    "column2",                         // Node.js: the list of every module, on every page
    "synthetic-implementations",       // rustdoc: "Auto Trait Implementations" (Send, Sync, ...)
    "synthetic-implementations-list",  //
    "toc",                             // Node.js: the page's contents, repeated from its headings
};
static_assert(std::is_sorted(std::begin(kSkippedIds), std::end(kSkippedIds)));

// Calls found(token) for each whitespace-separated token of an attribute's value until it says yes.
template <typename Found>
bool any_token(std::string_view value, const Found& found) {
  size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && is_space(value[i])) ++i;
    const size_t start = i;
    while (i < value.size() && !is_space(value[i])) ++i;
    if (i > start && found(value.substr(start, i - start))) return true;
  }
  return false;
}

// Whether an ARIA role attribute (a list of tokens) names a landmark that is not content.
bool skipped_role(std::string_view roles) {
  return any_token(roles, [](std::string_view role) {
    return iequals(role, "navigation") || iequals(role, "banner") || iequals(role, "contentinfo") ||
           iequals(role, "search");
  });
}

bool skipped_class(std::string_view classes) {
  if (std::find(std::begin(kSkippedClassValues), std::end(kSkippedClassValues), classes) !=
      std::end(kSkippedClassValues))
    return true;
  return any_token(classes, [](std::string_view name) {
    return std::binary_search(std::begin(kSkippedClasses), std::end(kSkippedClasses), name);
  });
}

// A start or end tag as parsed.
struct Tag {
  static constexpr size_t kKept = 32;  // bytes of the name kept (longer names compare by prefix)
  char name[kKept] = {};               // lower case
  size_t length = 0;                   // of the whole name
  uint8_t flags = 0;
  bool end = false;             // </name>
  bool self_closing = false;    // <name ... />
  bool skip_attribute = false;  // role="navigation", a furniture class or id, href="javascript:..."
  bool refresh = false;         // <meta http-equiv="refresh" content="0;...">

  void set_name(std::string_view written) {
    length = written.size();
    for (size_t i = 0; i < std::min(length, kKept); ++i) name[i] = lower(written[i]);
    flags = length <= kKept ? flags_of(lower_name()) : 0;
  }
  std::string_view lower_name() const { return std::string_view(name, std::min(length, kKept)); }
  bool is(std::string_view lower_case) const { return lower_name() == lower_case && length <= kKept; }
  bool same_name(const Tag& other) const {
    return length == other.length && lower_name() == other.lower_name();
  }
  bool skips() const { return ((flags & kSkip) || skip_attribute) && !(flags & kVoid) && !self_closing; }
};

// Whether a refresh's content ("0;URL=...", "0") redirects at once.
bool immediate_refresh(std::string_view content) {
  size_t i = 0;
  while (i < content.size() && is_space(content[i])) ++i;
  const size_t digits = i;
  uint64_t seconds = 0;
  while (i < content.size() && is_digit(content[i]) && seconds < 1000)
    seconds = seconds * 10 + (content[i++] - '0');
  return i > digits && seconds == 0;
}

class Converter {
 public:
  explicit Converter(std::string_view html) : in_(html) { out_.reserve(html.size() / 4); }

  std::string run() {
    const size_t n = in_.size();
    size_t i = 0;
    for (;;) {
      if (i >= n) {
        if (!skipping_) break;
        i = unclosed_skip(n);  // back to where the subtree began, or the end
      } else if (skipping_) {  // only tags matter: find the next one
        const void* lt = std::memchr(in_.data() + i, '<', n - i);
        i = lt == nullptr ? n : markup(static_cast<size_t>(static_cast<const char*>(lt) - in_.data()));
      } else if (in_[i] == '<') {
        i = markup(i);
      } else if (in_[i] == '&') {
        i = reference(i);
      } else {
        character(in_[i++]);
      }
      if (redirect_) return {};
    }
    while (!out_.empty() && (out_.back() == ' ' || out_.back() == '\t' || out_.back() == '\n'))
      out_.pop_back();
    return std::move(out_);
  }

 private:
  // --- Output --------------------------------------------------------------------------------

  void trim_line_end() {
    while (!out_.empty() && (out_.back() == ' ' || out_.back() == '\t')) out_.pop_back();
  }
  bool ends_with_blank_line() const {
    return out_.size() >= 2 && out_[out_.size() - 1] == '\n' && out_[out_.size() - 2] == '\n';
  }
  // A newline as written inside <pre>: blank lines allowed, never two in a row, none first.
  void newline() {
    trim_line_end();
    if (!out_.empty() && !ends_with_blank_line()) out_.push_back('\n');
  }
  // The breaks and the space owed before the next visible byte.
  void flush() {
    if (pending_break_ > 0) {
      trim_line_end();
      if (!out_.empty() && out_.back() != '\n') out_.push_back('\n');
      if (pending_break_ > 1 && !out_.empty() && !ends_with_blank_line()) out_.push_back('\n');
      pending_break_ = 0;
    } else if (pending_space_ && !out_.empty() && out_.back() != '\n') {
      out_.push_back(' ');
    }
    pending_space_ = false;
  }
  // One byte of text as written in the document.
  void character(char c) {
    if (pre_depth_ > 0) {
      if (c == '\r') return;  // CRLF -> LF
      if (c == '\n') {
        flush();
        newline();
        return;
      }
      flush();
      out_.push_back(c);
      return;
    }
    if (is_space(c)) {
      pending_space_ = true;
      return;
    }
    flush();
    out_.push_back(c);
  }
  void block(uint8_t flags) { pending_break_ = std::max(pending_break_, flags & kParagraph ? 2 : 1); }
  void code_point(uint32_t c) {
    if (c >= 0x80 && c <= 0x9F && kWindows1252[c - 0x80] != 0) c = kWindows1252[c - 0x80];
    if (c == 0 || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
    if (c == 0xA0) c = ' ';                // no-break space: a plain one
    if (c == 0xAD || c == 0x200B) return;  // soft hyphen, zero-width space: nothing
    if (c < 0x80) return character(static_cast<char>(c));
    char bytes[4];
    size_t length;
    if (c < 0x800) {
      bytes[0] = static_cast<char>(0xC0 | (c >> 6));
      length = 2;
    } else if (c < 0x10000) {
      bytes[0] = static_cast<char>(0xE0 | (c >> 12));
      length = 3;
    } else {
      bytes[0] = static_cast<char>(0xF0 | (c >> 18));
      length = 4;
    }
    for (size_t k = 1; k < length; ++k)
      bytes[k] = static_cast<char>(0x80 | ((c >> (6 * (length - 1 - k))) & 0x3F));
    flush();
    out_.append(bytes, length);
  }

  // --- Input ---------------------------------------------------------------------------------

  size_t find_or_end(std::string_view what, size_t from) const {
    const size_t at = in_.find(what, from);
    return at == std::string_view::npos ? in_.size() : at + what.size();
  }

  // The character reference at in_[at] == '&'; returns the position after it.
  size_t reference(size_t at) {
    const size_t n = in_.size();
    size_t i = at + 1;
    if (i < n && in_[i] == '#') {
      ++i;
      const bool hex = i < n && (in_[i] == 'x' || in_[i] == 'X');
      if (hex) ++i;
      const size_t digits = i;
      uint32_t value = 0;
      for (; i < n; ++i) {
        const char c = in_[i];
        uint32_t digit;
        if (is_digit(c)) {
          digit = static_cast<uint32_t>(c - '0');
        } else if (hex && lower(c) >= 'a' && lower(c) <= 'f') {
          digit = static_cast<uint32_t>(lower(c) - 'a' + 10);
        } else {
          break;
        }
        value = std::min<uint32_t>(value * (hex ? 16 : 10) + digit, 0x110000);  // beyond: U+FFFD
      }
      if (i == digits) {
        character('&');
        return at + 1;
      }
      if (i < n && in_[i] == ';') ++i;
      code_point(value);
      return i;
    }
    while (i < n && i - at <= 32 && (is_alpha(in_[i]) || is_digit(in_[i]))) ++i;
    if (i < n && in_[i] == ';' && i > at + 1) {
      const std::string_view name = in_.substr(at + 1, i - at - 1);
      const auto it =
          std::lower_bound(std::begin(kEntities), std::end(kEntities), name,
                           [](const Entity& e, std::string_view wanted) { return e.name < wanted; });
      if (it != std::end(kEntities) && it->name == name) {
        code_point(it->codepoint);
        return i + 1;
      }
    }
    character('&');  // unknown or malformed: as written
    return at + 1;
  }

  // Parses the tag whose '<' is at in_[at] into `tag`; returns the position after its '>'.
  size_t parse_tag(size_t at, Tag& tag) const {
    const size_t n = in_.size();
    size_t i = at + 1;
    if (in_[i] == '/') {
      tag.end = true;
      ++i;
    }
    const size_t name_start = i;
    while (i < n && is_name_char(in_[i])) ++i;
    tag.set_name(in_.substr(name_start, i - name_start));
    if (tag.end) return find_or_end(">", i);
    const bool meta = tag.is("meta");
    std::string_view http_equiv, content;
    size_t end = n;
    while (i < n) {
      const char c = in_[i];
      if (c == '>') {
        end = i + 1;
        break;
      }
      if (is_space(c) || c == '/') {
        if (c == '/' && i + 1 < n && in_[i + 1] == '>') tag.self_closing = true;
        ++i;
        continue;
      }
      const size_t attribute_start = i;
      while (i < n && !is_space(in_[i]) && in_[i] != '=' && in_[i] != '>' && in_[i] != '/') ++i;
      const std::string_view attribute = in_.substr(attribute_start, i - attribute_start);
      while (i < n && is_space(in_[i])) ++i;
      std::string_view value;
      if (i < n && in_[i] == '=') {
        ++i;
        while (i < n && is_space(in_[i])) ++i;
        if (i < n && (in_[i] == '"' || in_[i] == '\'')) {
          const size_t close = in_.find(in_[i], i + 1);
          const size_t end = close == std::string_view::npos ? n : close;
          value = in_.substr(i + 1, end - i - 1);
          i = std::min(n, end + 1);
        } else {
          const size_t value_start = i;
          while (i < n && !is_space(in_[i]) && in_[i] != '>') ++i;
          value = in_.substr(value_start, i - value_start);
        }
      }
      if (iequals(attribute, "role")) {
        tag.skip_attribute |= skipped_role(value);
      } else if (iequals(attribute, "class")) {
        tag.skip_attribute |= skipped_class(value);
      } else if (iequals(attribute, "id")) {
        tag.skip_attribute |= std::binary_search(std::begin(kSkippedIds), std::end(kSkippedIds), value);
      } else if (iequals(attribute, "href")) {
        tag.skip_attribute |= istarts_with(value, "javascript:");  // a control, not a link
      } else if (meta && iequals(attribute, "http-equiv")) {
        http_equiv = value;
      } else if (meta && iequals(attribute, "content")) {
        content = value;
      }
    }
    tag.refresh = meta && iequals(http_equiv, "refresh") && immediate_refresh(content);
    return end;
  }

  // The position after the end tag of the raw-text element `tag` whose start tag ends at `from`.
  size_t raw_text_end(const Tag& tag, size_t from) const {
    const std::string_view name = tag.lower_name();
    for (size_t i = from; (i = in_.find("</", i)) != std::string_view::npos; i += 2) {
      const size_t after = i + 2 + name.size();
      if (istarts_with(in_.substr(i + 2), name) && (after >= in_.size() || !is_name_char(in_[after])))
        return find_or_end(">", after);
    }
    return in_.size();
  }

  // Markup at in_[at] == '<': a comment, declaration, processing instruction or tag, or a '<' that
  // is text. Returns the position after it.
  size_t markup(size_t at) {
    const size_t n = in_.size();
    const char next = at + 1 < n ? in_[at + 1] : '\0';
    if (next == '!') {
      if (in_.compare(at, 4, "<!--") == 0) return find_or_end("-->", at + 2);
      if (in_.compare(at, 9, "<![CDATA[") == 0) return find_or_end("]]>", at + 9);
      return find_or_end(">", at + 2);  // <!DOCTYPE ...> and other declarations
    }
    if (next == '?') return find_or_end(">", at + 2);
    const size_t name_at = next == '/' ? at + 2 : at + 1;
    if (name_at >= n || !is_alpha(in_[name_at])) {  // "a < b": text
      if (!skipping_) character('<');
      return at + 1;
    }
    Tag tag;
    const size_t after = parse_tag(at, tag);
    if (tag.is("noscript")) noscript_depth_ = std::max(0, noscript_depth_ + (tag.end ? -1 : 1));
    if (tag.refresh && noscript_depth_ == 0) {  // inside <noscript> it redirects browsers without script only
      redirect_ = true;
      return n;
    }
    return skipping_ ? skipped_tag(tag, after) : tag_in_text(tag, after);
  }

  // A tag inside a dropped subtree: only the subtree's own name (and where it must end) matters.
  size_t skipped_tag(const Tag& tag, size_t after) {
    if (!tag.end) {
      if (tag.flags & kRawText) return raw_text_end(tag, after);  // a script inside the subtree
      if (skip_.is("head") && tag.is("body")) {                   // <head> left open
        leave_skip();
        return after;
      }
      if (tag.same_name(skip_) && !tag.self_closing) ++skip_depth_;
    } else if (tag.same_name(skip_)) {
      if (--skip_depth_ == 0) leave_skip();
    } else if (tag.is("body") || tag.is("html")) {
      return unclosed_skip(after);
    }
    return after;
  }

  // The dropped subtree reached </body>, </html> or (at == in_.size()) the end unclosed: its start
  // tag was mis-nested (qdoc leaves the div of its page header open around the whole page), so the
  // text resumes right after that tag, as if it had not been dropped. A few times a page at most
  // (each costs a second pass over the rest); after that, and for <head>, the rest is dropped.
  size_t unclosed_skip(size_t at) {
    if (skip_.is("head") || resumes_ == kMaxResumes) {
      leave_skip();
      return at;
    }
    ++resumes_;
    skipping_ = false;
    skip_depth_ = 0;
    noscript_depth_ = skip_noscript_depth_;
    return skip_content_;
  }

  void leave_skip() {
    skipping_ = false;
    skip_depth_ = 0;
    if (skip_.flags & kLine) {
      block(kLine);
    } else {
      pending_space_ = true;
    }
  }

  size_t tag_in_text(const Tag& tag, size_t after) {
    if (tag.end) {
      if (tag.flags & kPre) {
        if (pre_depth_ > 0) --pre_depth_;
        block(tag.flags);
      } else if (tag.flags & kLine) {
        block(tag.flags);
      } else if (tag.flags & kCell) {
        pending_space_ = true;
      }
      return after;
    }
    if (tag.skips()) {
      if (tag.flags & kRawText) return raw_text_end(tag, after);
      skip_ = tag;
      skipping_ = true;
      skip_depth_ = 1;
      skip_content_ = after;
      skip_noscript_depth_ = noscript_depth_;
      return after;
    }
    if (tag.flags & kPre) {
      block(tag.flags);
      ++pre_depth_;
      // A newline right after <pre> is not content (HTML drops it too).
      if (in_.compare(after, 1, "\n") == 0) return after + 1;
      if (in_.compare(after, 2, "\r\n") == 0) return after + 2;
      return after;
    }
    if (tag.is("br") && pre_depth_ > 0) {
      flush();
      newline();
    } else if (tag.flags & kLine) {
      block(tag.flags);
    } else if (tag.flags & kCell) {
      pending_space_ = true;
    }
    return after;
  }

  const std::string_view in_;
  std::string out_;
  int pending_break_ = 0;  // 1: end the line, 2: and leave a blank one
  bool pending_space_ = false;
  int pre_depth_ = 0;
  bool skipping_ = false;
  Tag skip_;                     // the element whose subtree is being dropped
  int skip_depth_ = 0;           // its open elements of the same name
  size_t skip_content_ = 0;      // where its contents begin
  int skip_noscript_depth_ = 0;  // noscript_depth_ at its start
  static constexpr int kMaxResumes = 8;
  int resumes_ = 0;  // unclosed subtrees not dropped after all
  int noscript_depth_ = 0;
  bool redirect_ = false;
};

}  // namespace

std::string html_to_text(std::string_view html) {
  return Converter(html).run();
}

std::string normalize_text(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::string out;
  out.reserve(text.size());
  bool blank = false;  // a blank line is owed before the next line with text
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.remove_suffix(1);
    if (line.empty()) {
      blank = !out.empty();
    } else {
      if (!out.empty()) out.append(blank ? "\n\n" : "\n");
      out.append(line);
      blank = false;
    }
    pos = end + 1;
  }
  return out;
}

bool looks_like_html(std::string_view name, std::string_view bytes) {
  const auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && iequals(name.substr(name.size() - suffix.size()), suffix);
  };
  if (ends_with(".html") || ends_with(".htm")) return true;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
  size_t i = 0;
  while (i < bytes.size() && is_space(bytes[i])) ++i;
  bytes.remove_prefix(i);
  return istarts_with(bytes, "<!doctype html") || istarts_with(bytes, "<html");
}

}  // namespace atl::runtime
