// Generated documentation HTML (Sphinx, javadoc, rustdoc, mdBook, DocBook) -> plain text for
// `atoll data prepare --documents`: one fast pass, no DOM, no library. It keeps what a reader reads
// -- prose, headings, code -- and drops what a browser uses to get around: the subtrees of script,
// style, head, nav, header, footer, noscript, template, svg, button, form, iframe, textarea, of any
// element whose role is navigation, banner, contentinfo or search, of links to javascript:, and of
// the classes Sphinx, rustdoc, mdBook and DocBook give their page furniture (sidebars, permalinks,
// "source" links, "Prev Up Next" bars; the list is in html_text.cpp). Block elements end the line,
// paragraph-like ones leave a blank line, whitespace collapses outside <pre> and is kept inside it,
// and character references become UTF-8, so the text a model trains on carries no markup.
#pragma once

#include <string>
#include <string_view>

namespace atl::runtime {

// The text of `html`: lines without trailing spaces, at most one blank line in a row, none first or
// last, no final newline. Malformed HTML is never an error: an element to drop that is still open
// at </body>, </html> or the end is not dropped after all (its text resumes after its start tag;
// an unclosed <head> ends at <body>), a lone '<' or '&' is text, and an unknown character reference
// stays as written. A page whose only purpose is to redirect (<meta http-equiv="refresh"
// content="0;..."> outside <noscript>) has no text of its own: "".
std::string html_to_text(std::string_view html);

// Plain text under the same line rules: trailing spaces, tabs and carriage returns trimmed, runs of
// blank lines cut to one, none first or last, no final newline; a leading UTF-8 byte order mark is
// dropped. The bytes are otherwise kept as they are.
std::string normalize_text(std::string_view text);

// Whether a document is HTML: its name ends in .html or .htm, or its bytes start (after a byte
// order mark and whitespace) with <!DOCTYPE html or <html, case-insensitively.
bool looks_like_html(std::string_view name, std::string_view bytes);

}  // namespace atl::runtime
