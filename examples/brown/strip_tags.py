#!/usr/bin/env python3
"""Turns the tagged Brown corpus (files like `The/at Fulton/np-tl ...`) into plain English text.

Usage: strip_tags.py CORPUS_DIR OUT_FILE
Each tagged sentence becomes one line; the corpus' tokenisation is undone (no space before
punctuation, `` and '' become double quotes attached to their words); files are separated by a
blank line.
"""
import os
import re
import sys

NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "'", "'s", "n't"}
NO_SPACE_AFTER = {"(", "["}


def words_of(line):
    for token in line.split():
        word, _, _tag = token.rpartition("/")
        yield word if word else token


def detokenize(words):
    out = []
    attach_next = False
    for word in words:
        if word == "``":
            out.append(" \"" if out else "\"")
            attach_next = True
            continue
        if word == "''":
            out.append("\"")
            continue
        if out and not attach_next and word not in NO_SPACE_BEFORE:
            out.append(" ")
        out.append(word)
        attach_next = word in NO_SPACE_AFTER
    return "".join(out).strip()


def main():
    corpus_dir, out_file = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(corpus_dir) if re.fullmatch(r"c[a-r]\d\d", n))
    if not names:
        sys.exit(f"strip_tags: no Brown corpus files (ca01 ... cr09) in {corpus_dir}")
    with open(out_file, "w", encoding="utf-8") as out:
        for name in names:
            with open(os.path.join(corpus_dir, name), encoding="utf-8", errors="replace") as f:
                sentences = [detokenize(words_of(line)) for line in f if line.strip()]
            out.write("\n".join(s for s in sentences if s) + "\n\n")
    print(f"strip_tags: {len(names)} files -> {out_file}")


if __name__ == "__main__":
    main()
