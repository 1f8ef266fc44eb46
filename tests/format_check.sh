#!/usr/bin/env bash
# Fails if any tracked C/C++ source differs from clang-format's output.
# usage: format_check.sh CLANG_FORMAT SOURCE_ROOT
set -euo pipefail
cd "$2"
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' 2>/dev/null || find core passes backends plugins experiments tests bench -name '*.cpp' -o -name '*.h' -o -name '*.hpp')
"$1" --dry-run --Werror "${files[@]}"
echo "${#files[@]} files formatted"
