# lit configuration for the tpc-opt tests: `lit tests/lit` (also run by tests/test_lit.py).
import os
import sys

import lit.formats

config.name = "tpc-opt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py"]

# The tools of the Python running lit (a virtual environment need not be activated): tpc-opt
# and filecheck are run as that Python's modules, so a tool of another environment on PATH is
# never picked up instead.
config.substitutions.append(("tpc-opt", f"{sys.executable} -m tensorplay.tools.tpc_opt"))
config.substitutions.append(("filecheck", f"{sys.executable} -m filecheck"))
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
for var in ("HOME", "PATH", "PYTHONPATH", "VIRTUAL_ENV"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
