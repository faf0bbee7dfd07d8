#!/bin/sh
# Makes test/compat/py/.venv: a virtual environment of the repository's own
# holding exactly what test/compat/py/requirements.txt pins (the official
# E2B Python SDKs, pytest), from PyPI. Nothing when it already holds them;
# a clear failure, never a silent skip, when PyPI cannot be reached.
# COVE_PY_VENV names another place for it (a test's).
set -eu
cd "$(dirname "$0")/.."
dir=test/compat/py
venv=${COVE_PY_VENV:-$dir/.venv}
if cmp -s "$dir/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
	exit 0
fi
if [ -e "$venv" ]; then
	rm -rf --one-file-system "$venv"
fi
python3 -m venv "$venv"
if ! "$venv/bin/pip" install --no-input --quiet --disable-pip-version-check -r "$dir/requirements.txt"; then
	echo "python-venv: could not install the Python SDKs that $dir/requirements.txt pins from PyPI (is https://pypi.org reachable? pip's own message is above); the compatibility suite needs them" >&2
	rm -rf --one-file-system "$venv"
	exit 1
fi
# Last: its presence says the environment holds these pins.
cp "$dir/requirements.txt" "$venv/requirements.txt"
