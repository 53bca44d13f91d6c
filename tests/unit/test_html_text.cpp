// HTML -> plain text for `atoll data prepare --documents`: dropped subtrees, line breaks, <pre>,
// character references, markup that is not text, malformed input; the plain-text normalization and
// the HTML sniffing beside it.
#include <gtest/gtest.h>

#include <string>

#include "runtime/data/html_text.h"

using atl::runtime::html_to_text;
using atl::runtime::looks_like_html;
using atl::runtime::normalize_text;

namespace {

TEST(HtmlToText, DropsTheSubtreesThatAreNotContent) {
  EXPECT_EQ(html_to_text("<html><head><title>Page title</title><style>p { color: red }</style></head>"
                         "<body><p>Kept.</p></body></html>"),
            "Kept.");
  for (const char* tag :
       {"script", "style", "nav", "header", "footer", "noscript", "template", "svg", "button", "form"}) {
    const std::string name = tag;
    EXPECT_EQ(
        html_to_text("<p>before</p><" + name + " class=x>dropped <b>text</b></" + name + "><p>after</p>"),
        "before\n\nafter")
        << name;
  }
  for (const char* role : {"navigation", "banner", "contentinfo", "search", "presentation navigation"}) {
    EXPECT_EQ(html_to_text(std::string("<p>a</p><div role=\"") + role + "\">menu</div><p>b</p>"), "a\n\nb")
        << role;
  }
  EXPECT_EQ(html_to_text("<div role=main>kept</div>"), "kept");
  // Nested elements of the same name: the subtree ends at its own end tag, not the first one.
  EXPECT_EQ(html_to_text("<div>start</div><DIV Role='Navigation'><div><div>deep</div></div><div>more</div>"
                         "<br><img src=x.png></div><div>end</div>"),
            "start\nend");
  // A script's text is not markup, even inside a dropped subtree.
  EXPECT_EQ(html_to_text("<p>a</p><script>if (x < y) document.write('</div><p>not text');</script><p>b</p>"),
            "a\n\nb");
  EXPECT_EQ(html_to_text("<nav><script>var s = '</nav>';</script>menu</nav><p>b</p>"), "b");
  // Void and self-closed elements open no subtree.
  EXPECT_EQ(html_to_text("<p>a <input role=search> b <svg/> c</p>"), "a b c");
}

TEST(HtmlToText, KeepsPreformattedTextVerbatim) {
  EXPECT_EQ(
      html_to_text("<p>Example:</p><pre>\nfn main() {\n    let  x =\t1;   \n\n\n\n    <b>x</b> &lt; 2\n}"
                   "\n</pre><p>Done.</p>"),
      "Example:\n\nfn main() {\n    let  x =\t1;\n\n    x < 2\n}\n\nDone.");
  EXPECT_EQ(html_to_text("<pre>line one<br>line two</pre>"), "line one\nline two");
  EXPECT_EQ(html_to_text("<pre>\r\n  indented\r\n</pre>"), "  indented");
}

TEST(HtmlToText, DecodesCharacterReferences) {
  EXPECT_EQ(html_to_text("&amp; &lt; &gt; &quot; &apos; &AMP;"), "& < > \" ' &");
  EXPECT_EQ(html_to_text("a&nbsp;b&nbsp;&nbsp; c&#160;d"), "a b c d");
  EXPECT_EQ(html_to_text("&#65;&#x42;&#X43;&#x1F600;&#8212;"), "ABC\xF0\x9F\x98\x80\xE2\x80\x94");
  EXPECT_EQ(
      html_to_text("&mdash;&ndash;&hellip;&lsquo;&rsquo;&ldquo;&rdquo;&laquo;&raquo;"),
      "\xE2\x80\x94\xE2\x80\x93\xE2\x80\xA6\xE2\x80\x98\xE2\x80\x99\xE2\x80\x9C\xE2\x80\x9D\xC2\xAB\xC2\xBB");
  EXPECT_EQ(
      html_to_text("&copy;&reg;&trade;&times;&minus;&para;&sect;&middot;&bull;&deg;&plusmn;"),
      "\xC2\xA9\xC2\xAE\xE2\x84\xA2\xC3\x97\xE2\x88\x92\xC2\xB6\xC2\xA7\xC2\xB7\xE2\x80\xA2\xC2\xB0\xC2\xB1");
  EXPECT_EQ(
      html_to_text("&rarr;&larr;&uarr;&darr;&harr;&le;&ge;&ne;"),
      "\xE2\x86\x92\xE2\x86\x90\xE2\x86\x91\xE2\x86\x93\xE2\x86\x94\xE2\x89\xA4\xE2\x89\xA5\xE2\x89\xA0");
  EXPECT_EQ(html_to_text("soft&shy;hy&zwsp;phen&#173;ated&#x200B;"), "softhyphenated");
  // Unknown or malformed references stay as written; numeric ones out of range become U+FFFD.
  EXPECT_EQ(html_to_text("&bogus; &amp &#; &#x; a & b &#1114112; &#0;"),
            "&bogus; &amp &#; &#x; a & b \xEF\xBF\xBD \xEF\xBF\xBD");
  EXPECT_EQ(html_to_text("&#150;"), "\xE2\x80\x93") << "0x80-0x9F mean Windows-1252";
}

TEST(HtmlToText, EndsLinesAtBlocksAndCollapsesWhitespace) {
  EXPECT_EQ(html_to_text("<h1>Title</h1>\n  <p>One   <em>two</em>\n\tthree</p><p>four</p>"),
            "Title\n\nOne two three\n\nfour");
  EXPECT_EQ(html_to_text("<ul><li>a</li><li>b<br>c</li></ul>after"), "a\nb\nc\n\nafter");
  EXPECT_EQ(html_to_text("<dl><dt>term</dt><dd>meaning</dd></dl>"), "term\nmeaning");
  EXPECT_EQ(html_to_text("<table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>2</td></tr></table>"),
            "k v\n1 2");
  EXPECT_EQ(html_to_text("<div><div><p>x</p></div></div><div></div><p></p><p>y</p>"), "x\n\ny")
      << "one blank line at most, none first or last";
  EXPECT_EQ(html_to_text("in<span>line</span> <a href='#'>link</a>"), "inline link");
  EXPECT_EQ(html_to_text("   \n <p>  </p>  "), "");
}

TEST(HtmlToText, DropsCommentsDeclarationsAndCdata) {
  EXPECT_EQ(html_to_text("<!DOCTYPE html><?xml version='1.0'?><p>a<!-- <p>hidden</p> -->b</p>"
                         "<![CDATA[ raw <x> ]]><!---->c"),
            "ab\n\nc");
  EXPECT_EQ(html_to_text("<nav><!-- </nav> -->menu</nav>text"), "text");
  EXPECT_EQ(html_to_text("a<!-->b<!--->c<!-- x -->"), "abc") << "HTML's abrupt empty comments";
}

TEST(HtmlToText, ToleratesMalformedHtml) {
  EXPECT_EQ(html_to_text("a < b and c<3 </ d"), "a < b and c<3 </ d");
  EXPECT_EQ(html_to_text("<html><head><title>t</title><body><p>body text</p>"), "body text")
      << "an unclosed head ends at body";
  // A subtree to drop that never closes was mis-nested: kept after all, from its start tag on.
  EXPECT_EQ(html_to_text("<body><nav>menu<p>closed late</body><p>x"), "menu\n\nclosed late\n\nx");
  EXPECT_EQ(html_to_text("<div class=toc><div>top</div><p>page</p><nav>n</nav>"), "top\n\npage");
  EXPECT_EQ(html_to_text("<div class=toc><div class=toc>a</div></div><p>b</p>"), "b");
  EXPECT_EQ(html_to_text("<p>text<div"), "text");
  EXPECT_EQ(html_to_text("<p title='a > b'>quoted</p><a href=\"x>y\">z</a>"), "quoted\n\nz");
  EXPECT_EQ(html_to_text("<p>unclosed<p>paragraphs<li>and items"), "unclosed\n\nparagraphs\nand items");
}

TEST(HtmlToText, RedirectPagesHaveNoText) {
  EXPECT_EQ(html_to_text("<html><head><meta http-equiv=\"refresh\" content=\"0;URL=../a.html\"></head>"
                         "<body><p>Redirecting to <a href=\"../a.html\">../a.html</a>...</p></body></html>"),
            "");
  EXPECT_EQ(html_to_text("<head><meta http-equiv=refresh content=\"30\"></head><p>stays</p>"), "stays")
      << "a page that reloads later has text of its own";
  EXPECT_EQ(
      html_to_text("<head><noscript><meta http-equiv=refresh content=\"0; URL=noscript.html\"></noscript>"
                   "</head><p>stays</p>"),
      "stays")
      << "one that redirects only browsers without script too";
}

TEST(HtmlToText, NormalizesPlainText) {
  EXPECT_EQ(normalize_text("\xEF\xBB\xBF\n\nline one  \t\r\nline two\n\n\n  \n\tindented\n\n"),
            "line one\nline two\n\n\tindented");
  EXPECT_EQ(normalize_text(" \n\n"), "");
  EXPECT_EQ(normalize_text("no newline"), "no newline");
}

TEST(HtmlToText, SniffsHtmlByNameOrContent) {
  EXPECT_TRUE(looks_like_html("a/b.html", "plain"));
  EXPECT_TRUE(looks_like_html("B.HTM", ""));
  EXPECT_TRUE(looks_like_html("page", "\xEF\xBB\xBF \n<!doctype HTML>"));
  EXPECT_TRUE(looks_like_html("page.txt", "  <HTML lang=en>"));
  EXPECT_FALSE(looks_like_html("notes.txt", "some <html> inside"));
  EXPECT_FALSE(looks_like_html("x.html.gz", "\x1F\x8B\x08"));
  EXPECT_FALSE(looks_like_html("x.xml", "<?xml version='1.0'?>"));
}

}  // namespace
