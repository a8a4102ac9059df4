import os
import sys

# The one place that sets sys.path for the tests: tests/ (the harness package
# `support`) and the checkout (the package `ljgdb`, through ljgdb.py).
TESTS = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.dirname(TESTS), TESTS):
    if _p not in sys.path:
        sys.path.insert(0, _p)
