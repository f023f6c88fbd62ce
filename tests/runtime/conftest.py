"""The ``driver`` fixture: every test that takes it runs once per driver (``drivers.DRIVERS``).

A test about one seam narrows the list, or marks drivers that fail today, with ``drivers.drivers_where``.
"""

from __future__ import annotations

import pytest

from .drivers import DRIVERS, Driver, make_driver


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> Driver:
    return make_driver(str(request.param))
