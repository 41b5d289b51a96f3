#!/usr/bin/env python3
"""Checks a ZIP the page made against the folder it was made from.

    python3 tests-e2e/lib/check_zip.py ZIP DIR [PREFIX]

Every member is read whole through Python's zipfile (which checks each member's
CRC-32 and sizes, Zip64 included). A member whose name (minus PREFIX, the folder's
own name) is a file under DIR must have that file's bytes, compared block by block;
any other member is hashed. Members
whose names are not in DIR are the ones the page renamed (and reported): each must
have the bytes of a file under DIR that no member has by name. Every regular file
under DIR must be accounted for; every folder must be a member. Prints one JSON
line: members, files, folders, renamed, bytes, problems (the first 20); exits 1 on
any problem.
"""

import hashlib
import json
import os
import sys
import zipfile


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(8 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


def main():
    zip_path, root = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else ""
    problems = []
    sources = {}
    folders = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        folders.add("" if rel == "." else rel)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            sources[os.path.relpath(full, root)] = full
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                dirnames.remove(name)
    matched = set()
    renamed = []
    seen_folders = set()
    members = 0
    total = 0
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            members += 1
            name = info.filename
            if prefix:
                if not (name == prefix + "/" or name.startswith(prefix + "/")):
                    problems.append(f"member {name!r} is outside {prefix!r}/")
                    continue
                name = name[len(prefix) + 1 :]
            if info.is_dir():
                seen_folders.add(name.rstrip("/"))
                continue
            source = sources.get(name)
            with z.open(info) as f:
                if source is None:
                    h = hashlib.sha256()
                    while True:
                        block = f.read(8 << 20)
                        if not block:
                            break
                        h.update(block)
                        total += len(block)
                    renamed.append((name, h.hexdigest(), info.file_size))
                    continue
                matched.add(name)
                # Compared block by block with its source: two SHA-256 passes over
                # the 4.1 GiB member of tests-e2e/zip-check.ts took most of its check.
                with open(source, "rb") as g:
                    while True:
                        block = f.read(8 << 20)
                        if block != g.read(len(block) or 1):
                            problems.append(f"{name!r}: bytes differ from the source")
                            break
                        if not block:
                            break
                        total += len(block)
    unmatched = {p: sources[p] for p in sources if p not in matched}
    by_hash = {}
    for p, full in unmatched.items():
        by_hash.setdefault(file_hash(full), []).append(p)
    for name, digest, _ in renamed:
        candidates = by_hash.get(digest)
        if not candidates:
            problems.append(f"member {name!r} matches no source file by name or by bytes")
            continue
        candidates.pop()
    left = [p for ps in by_hash.values() for p in ps]
    for p in left[:20]:
        problems.append(f"source file {p!r} is not in the ZIP")
    missing_folders = sorted(f for f in folders if f and f not in seen_folders)
    for f in missing_folders[:20]:
        problems.append(f"folder {f!r} is not in the ZIP")
    print(
        json.dumps(
            {
                "members": members,
                "files": len(matched) + len(renamed),
                "folders": len(seen_folders),
                "renamed": len(renamed),
                "bytes": total,
                "problems": problems[:20],
                "problem_count": len(problems),
            }
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
