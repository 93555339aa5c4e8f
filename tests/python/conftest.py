"""pytest setup: the package from this checkout (tools/python), with the library it finds beside it (lib/);
the commands from FEDVM_BIN (default bin/)."""

import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
FEDVM_BIN = os.path.abspath(os.environ.get("FEDVM_BIN") or os.path.join(ROOT, "bin"))
