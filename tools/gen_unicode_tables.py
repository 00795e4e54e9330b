#!/usr/bin/env python3
"""Generates include/smol/text/unicode_tables.hpp: sorted code point ranges for
the three Unicode classes the Llama-3 pre-tokenizer split needs:

  letters     \\p{L}  general category Lu, Ll, Lt, Lm, Lo
  numbers     \\p{N}  general category Nd, Nl, No
  whitespace  \\s     the White_Space property (what PCRE2/Oniguruma/fancy-regex
                     treat as \\s in Unicode mode)

Input, one of:
  --ucd DIR      Debian's unicode-data package (UnicodeData.txt and PropList.txt);
  --ranges FILE  the classes already extracted, as written by tools/unicode-ranges.mjs
                 from the npm package @unicode/unicode-<version> (for a Unicode
                 version newer than Debian's: the tables are at 15.1, Debian 12 has 15.0).

Usage:
  python3 tools/gen_unicode_tables.py [--ucd /usr/share/unicode | --ranges ranges.txt] \\
      [--out include/smol/text/unicode_tables.hpp]
"""

import argparse
import os
import re


def read_categories(path):
    """Yields (first, last, category) from UnicodeData.txt, expanding the
    '<..., First>' / '<..., Last>' pairs that stand for whole blocks."""
    pending_first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 3:
                continue
            cp = int(fields[0], 16)
            name, category = fields[1], fields[2]
            if name.endswith(", First>"):
                pending_first = cp
                continue
            if name.endswith(", Last>"):
                yield pending_first, cp, category
                pending_first = None
                continue
            yield cp, cp, category


def read_property(path, wanted):
    """Yields (first, last) for every line of a PropList-style file that sets
    the property `wanted`."""
    pattern = re.compile(r"^([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*(\w+)")
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = pattern.match(line)
            if not m or m.group(3) != wanted:
                continue
            first = int(m.group(1), 16)
            last = int(m.group(2), 16) if m.group(2) else first
            yield first, last


def merge(ranges):
    """Sorts and coalesces overlapping or adjacent ranges."""
    out = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return out


def read_ranges_file(path):
    """Reads tools/unicode-ranges.mjs output: 'version X.Y.Z', then lines
    '<letters|numbers|whitespace> <first hex> <last hex>'."""
    version, classes = "unknown", {"letters": [], "numbers": [], "whitespace": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 2 and fields[0] == "version":
                version = fields[1]
            elif len(fields) == 3 and fields[0] in classes:
                classes[fields[0]].append((int(fields[1], 16), int(fields[2], 16)))
            elif fields:
                raise SystemExit(f"{path}: unexpected line: {line.strip()}")
    return version, classes["letters"], classes["numbers"], classes["whitespace"]


def unicode_version(ucd):
    readme = os.path.join(ucd, "ReadMe.txt")
    try:
        with open(readme, encoding="utf-8") as f:
            m = re.search(r"Version (\d+\.\d+\.\d+)", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    return "unknown"


def emit_table(name, ranges):
    lines = [f"inline constexpr CodepointRange {name}[] = {{"]
    row = []
    for first, last in ranges:
        row.append(f"{{0x{first:X}, 0x{last:X}}}")
        if len(row) == 4:
            lines.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        lines.append("    " + ", ".join(row) + ",")
    lines.append("};")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ucd", default="/usr/share/unicode")
    parser.add_argument("--ranges", help="classes from tools/unicode-ranges.mjs instead of --ucd")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "include",
                                                      "smol", "text", "unicode_tables.hpp"))
    args = parser.parse_args()

    if args.ranges:
        version, letters, numbers, whitespace = read_ranges_file(args.ranges)
        source, command = "the npm package @unicode/unicode-" + version, (
            f"npm pack @unicode/unicode-{version} && tar xzf unicode-unicode-{version}-*.tgz\n"
            f"//   node tools/unicode-ranges.mjs package > ranges.txt\n"
            f"//   python3 tools/gen_unicode_tables.py --ranges ranges.txt")
    else:
        letters, numbers = [], []
        for first, last, category in read_categories(os.path.join(args.ucd, "UnicodeData.txt")):
            if category in ("Lu", "Ll", "Lt", "Lm", "Lo"):
                letters.append((first, last))
            elif category in ("Nd", "Nl", "No"):
                numbers.append((first, last))
        whitespace = list(read_property(os.path.join(args.ucd, "PropList.txt"), "White_Space"))
        version = unicode_version(args.ucd)
        source, command = "Debian unicode-data", f"python3 tools/gen_unicode_tables.py --ucd {args.ucd}"

    letters, numbers, whitespace = merge(letters), merge(numbers), merge(whitespace)

    header = f"""// GENERATED by tools/gen_unicode_tables.py from the Unicode Character Database
// {version} ({source}). Do not edit by hand; to regenerate:
//   {command}
//
// Sorted, disjoint, coalesced code point ranges [first, last] for the classes
// the Llama-3 pre-tokenizer split uses: letters (\\p{{L}}: Lu Ll Lt Lm Lo),
// numbers (\\p{{N}}: Nd Nl No) and whitespace (\\s: the White_Space property).
// unicode.hpp looks code points up here by binary search.
#pragma once

#include "../detail/abi.hpp"

SMOL_NAMESPACE_BEGIN
namespace unicode::detail {{

struct CodepointRange {{
    char32_t first;
    char32_t last;
}};

inline constexpr const char* kUnicodeTablesVersion = "{version}";

// {len(letters)} ranges
{emit_table("kLetterRanges", letters)}

// {len(numbers)} ranges
{emit_table("kNumberRanges", numbers)}

// {len(whitespace)} ranges
{emit_table("kWhitespaceRanges", whitespace)}

}}  // namespace unicode::detail
SMOL_NAMESPACE_END
"""
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(header)
    print(f"wrote {args.out}: {len(letters)} letter, {len(numbers)} number, "
          f"{len(whitespace)} whitespace ranges (Unicode {version})")


if __name__ == "__main__":
    main()
