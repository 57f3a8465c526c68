"""unclogbench: the pieces behind loadtest/run.py (see loadtest/README.md, "Code map").

Python 3 standard library only. Paths shared by every module live here.
"""

import os

PKG = os.path.dirname(os.path.abspath(__file__))
HERE = os.path.dirname(PKG)  # loadtest/
TOP = os.path.dirname(HERE)  # the repository
FIXTURES = os.path.join(HERE, "fixtures")
TEMPLATES = os.path.join(HERE, "templates")
PLOTS = os.path.join(HERE, "plots")
# Where a run writes by default, outside the tracked tree; a run worth keeping
# is published into loadtest/results/ by hand (loadtest/README.md).
RESULTS = os.path.join(TOP, "build", "results")
MiB = 1 << 20


def log(msg):
    print(msg, flush=True)
