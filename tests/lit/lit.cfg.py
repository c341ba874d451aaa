# lit configuration for the tpc-opt tests: `lit tests/lit` (also run by tests/test_lit.py).
import os
import shutil
import sys

import lit.formats

config.name = "tpc-opt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py"]

tpc_opt = shutil.which("tpc-opt")
config.substitutions.append(("tpc-opt", tpc_opt or f"{sys.executable} -m tensorplay.tools.tpc_opt"))
config.substitutions.append(("filecheck", shutil.which("filecheck") or "filecheck"))
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
for var in ("HOME", "PATH", "PYTHONPATH", "VIRTUAL_ENV"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
