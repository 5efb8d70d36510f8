"""Shared test configuration.

`tests/` is a package, so pytest imports this file as `tests.conftest` and puts
the repository root on `sys.path` first: `from tests.support... import` and
`from tests.component... import` then work with a plain `pytest` too, not only
with `python -m pytest`.
"""
