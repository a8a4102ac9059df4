import os
import sys

# The one place that sets sys.path for the tests: tests/ (the harness package
# `support`) and the checkout (the package `ljgdb`, through ljgdb.py).
TESTS = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.dirname(TESTS), TESTS):
    if _p not in sys.path:
        sys.path.insert(0, _p)


# The serial group: tests whose figures depend on a quiet machine (CPU
# shares, a sampler's cost) carry the marker `serial`; run-tests.sh runs
# the others on two workers (--serial=skip), then these alone (--serial=only).
def pytest_addoption(parser):
    parser.addoption("--serial", choices=("all", "skip", "only"), default="all",
                     help="tests marked serial: run them with the rest (all, the default), "
                          "leave them out (skip) or run only them (only)")


def pytest_collection_modifyitems(config, items):
    how = config.getoption("--serial")
    if how == "all":
        return
    keep, drop = [], []
    for item in items:
        serial = item.get_closest_marker("serial") is not None
        (keep if serial == (how == "only") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
