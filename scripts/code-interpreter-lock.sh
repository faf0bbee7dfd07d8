#!/bin/sh
# Makes internal/template/recipes/code-interpreter.lock, what
# code-interpreter-v1's Python installs from PyPI, from
# code-interpreter.in (E2B's code-interpreter-v1 packages at its
# versions): every package and what it pulls in pinned for CPython 3.13 on
# x86-64 Linux (Debian 13's), each with the sha256 of the wheels pip may
# pick there (pip installs it with --require-hashes). Run by hand when the
# list changes (the lock's other pins stay); needs PyPI.
set -eu
cd "$(dirname "$0")/.."
dir=internal/template/recipes
tmp=$(mktemp -d /tmp/cove-lock.XXXXXX)
trap 'rm -rf --one-file-system "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check uv==0.13.9
# uv keeps the pins of the output file it is given where the list allows
# them: a package added moves only what it must.
cp "$dir/code-interpreter.lock" "$tmp/pins.txt"
"$tmp/venv/bin/uv" pip compile --quiet --no-header --no-annotate --python-version 3.13 \
	--python-platform x86_64-manylinux_2_28 --only-binary :all: "$dir/code-interpreter.in" -o "$tmp/pins.txt"
"$tmp/venv/bin/python" scripts/wheel-hashes.py <"$tmp/pins.txt" >"$tmp/lock"
mv "$tmp/lock" "$dir/code-interpreter.lock"
