#!/usr/bin/env python3
"""Writes a C++ source defining `extern const char SYMBOL[]` with a text file's bytes
(the HTML report inlines Chart.js, so the page works offline)."""
import sys

source, output, symbol = sys.argv[1:4]
data = open(source, "rb").read()
with open(output, "w") as out:
    out.write(f"// Generated from {source}; do not edit.\n")
    out.write(f"extern const char {symbol}[];\n")
    out.write(f"extern const char {symbol}[] = {{\n")
    for start in range(0, len(data), 24):
        out.write(",".join(str(b) for b in data[start:start + 24]) + ",\n")
    out.write("0};\n")
