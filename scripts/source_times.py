#!/usr/bin/env python3
"""Keeps a build incremental across copies of the working tree (scripts/gpu_check.sh).

A device call gets a fresh copy of the tree, every file newer than the build/ kept from the last
call, so ninja rebuilt everything (92 s of the 2026-11-27 10:14Z call). After a build,
`save RECORD` writes each source file's content hash and modification time; before the next build,
`restore RECORD` gives every file whose content is unchanged its recorded time back, so that only
changed files are newer than their outputs. The caller removes RECORD before building and saves it
only after a build that succeeded: a failed build leaves no record, and the next one trusts the
times it finds.

Usage: source_times.py save|restore RECORD   (from the repository root)
"""
import hashlib
import json
import os
import subprocess
import sys


def source_files():
    """Tracked and untracked-not-ignored files: what the build can read from the tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, check=True)
    return [path for path in listed.stdout.decode().split("\0") if path and os.path.isfile(path)]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def save(record):
    times = {path: [digest(path), os.stat(path).st_mtime_ns] for path in source_files()}
    with open(record, "w") as f:
        json.dump(times, f)
    print(f"source_times: {len(times)} files recorded")


def restore(record):
    if not os.path.exists(record):
        print("source_times: no record (first build here, or the last one failed): times left as they are")
        return
    with open(record) as f:
        times = json.load(f)
    kept = changed = 0
    for path in source_files():
        entry = times.get(path)
        if entry and entry[0] == digest(path):
            os.utime(path, ns=(entry[1], entry[1]))
            kept += 1
        else:
            changed += 1
    print(f"source_times: {kept} unchanged files given their recorded times back; {changed} new or changed")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "restore"):
        sys.exit(__doc__.strip().splitlines()[-1])
    (save if sys.argv[1] == "save" else restore)(sys.argv[2])
