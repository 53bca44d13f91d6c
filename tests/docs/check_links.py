#!/usr/bin/env python3
"""Check the relative links of Atoll's documentation.

Usage: check_links.py [REPO_ROOT]

For README.md and every docs/**/*.md under REPO_ROOT (default: the current directory), every
relative Markdown link -- [text](path), [text](path#anchor), [text](#anchor), images, and reference
definitions ([name]: path) -- must resolve: the file (relative to the linking file) exists, and an
anchor names a heading of the target Markdown file under GitHub's rules (lowercase; characters
other than letters, digits, spaces, hyphens and underscores removed; spaces become hyphens; a
repeated heading gets -1, -2, ...). Web addresses (any scheme: http, https, mailto, ...) and links
inside fenced code blocks or inline code are not checked.

Prints one line per broken link, `FILE:LINE: link TARGET: reason`, and exits 1 if there is any;
otherwise prints how many links it checked and exits 0. Standard library only (Python 3.11).
"""
from __future__ import annotations

import pathlib
import re
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^()\s]+(?:\([^()\s]*\)[^()\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINE_ANCHOR = re.compile(r"^L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?$")


def strip_code_spans(text: str) -> str:
    """The text with inline code spans blanked out (same length, so columns stay)."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def heading_text(raw: str) -> str:
    """A heading's rendered text, roughly as GitHub renders it before making its slug."""
    parts = []
    pos = 0
    for m in CODE_SPAN.finditer(raw):
        parts.append(("text", raw[pos:m.start()]))
        parts.append(("code", m.group(2).strip() if m.group(2).strip() else m.group(2)))
        pos = m.end()
    parts.append(("text", raw[pos:]))
    out = []
    for kind, piece in parts:
        if kind == "text":
            piece = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", piece)  # links and images: their text
            piece = re.sub(r"<[^>]+>", "", piece)  # inline HTML
            piece = re.sub(r"(?<![\w])_+([^_]+?)_+(?![\w])", r"\1", piece)  # _emphasis_
        out.append(piece)
    return "".join(out).strip()


def slug(text: str) -> str:
    """GitHub's anchor for a heading text (github-slugger, without the duplicate suffix)."""
    kept = "".join(ch for ch in text.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


class MarkdownFile:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.lines = path.read_text(encoding="utf-8").split("\n")
        self.in_code = self._code_lines()
        self.anchors = self._anchors()

    def _code_lines(self) -> list[bool]:
        flags = []
        fence = None  # (character, length) of the open fence
        for line in self.lines:
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence = (m.group(1)[0], len(m.group(1)))
                    flags.append(True)
                    continue
                flags.append(False)
            else:
                flags.append(True)
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and \
                        line.strip() == m.group(1)[0] * len(line.strip()):
                    fence = None
        return flags

    def _anchors(self) -> set[str]:
        anchors: set[str] = set()
        counts: dict[str, int] = {}

        def add(text: str) -> None:
            base = slug(heading_text(text))
            candidate = base
            if candidate in counts:
                n = counts[base]
                while True:
                    n += 1
                    candidate = f"{base}-{n}"
                    if candidate not in counts:
                        break
                counts[base] = n
            counts.setdefault(candidate, 0)
            anchors.add(candidate)

        for i, line in enumerate(self.lines):
            if self.in_code[i]:
                continue
            for m in HTML_ANCHOR.finditer(line):
                anchors.add(m.group(1))
            m = ATX_HEADING.match(line)
            if m:
                add(m.group(2) or "")
                continue
            if i > 0 and SETEXT_UNDERLINE.match(line) and not self.in_code[i - 1]:
                prev = self.lines[i - 1]
                if prev.strip() and not re.match(r"^ {0,3}([#>|*+-]|\d+[.)]\s|```|~~~)", prev) \
                        and not SETEXT_UNDERLINE.match(prev):
                    add(prev.strip())
        return anchors

    def links(self):
        """(line number, target) of every link outside code."""
        for i, line in enumerate(self.lines):
            if self.in_code[i]:
                continue
            text = strip_code_spans(line)
            m = REFERENCE_DEF.match(text)
            if m:
                yield i + 1, m.group(2)
                continue
            for m in INLINE_LINK.finditer(text):
                yield i + 1, m.group(2)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    files = [f for f in files if f.is_file()]
    if not files:
        print(f"check_links: no README.md or docs/*.md under {root}")
        return 1
    cache: dict[pathlib.Path, MarkdownFile] = {}

    def markdown(path: pathlib.Path) -> MarkdownFile:
        if path not in cache:
            cache[path] = MarkdownFile(path)
        return cache[path]

    broken = 0
    checked = 0
    for source in files:
        doc = markdown(source)
        shown = source.relative_to(root)
        for line, target in doc.links():
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if SCHEME.match(target) or target.startswith("//"):
                continue  # a web address (http, https, mailto, ...): not checked here
            checked += 1
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part)
            anchor = urllib.parse.unquote(anchor)
            if path_part:
                if path_part.startswith("/"):
                    dest = (root / path_part.lstrip("/")).resolve()
                else:
                    dest = (source.parent / path_part).resolve()
            else:
                dest = source
            reason = None
            if not dest.exists():
                reason = f"{dest.relative_to(root) if dest.is_relative_to(root) else dest} does not exist"
            elif anchor:
                if dest.is_dir():
                    reason = "an anchor on a directory"
                elif dest.suffix.lower() in (".md", ".markdown"):
                    if anchor not in markdown(dest).anchors:
                        where = "this file" if dest == source else str(dest.relative_to(root))
                        reason = f"no heading of {where} has the anchor #{anchor}"
                elif not LINE_ANCHOR.match(anchor):
                    reason = f"#{anchor} on a file that is not Markdown (only #L<line> anchors are allowed)"
            if reason:
                broken += 1
                print(f"{shown}:{line}: link {target}: {reason}")
    if broken:
        print(f"check_links: {broken} broken of {checked} relative links in {len(files)} files")
        return 1
    print(f"check_links: {checked} relative links in {len(files)} files, all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
