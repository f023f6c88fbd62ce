"""``/docs`` (Swagger UI) and ``/redoc`` in a real headless Chromium: drawn from the package's own files, offline.

The server, the browser and their helpers are test_inspector_browser.py's (the API mounted under ``/fsm``,
with keys): these pages need no key, they only read ``openapi.json``.
"""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .test_inspector_browser import (
    Served,
    browser_fixture,
    browser_log,
    page_fixture,
    requested_urls,
    served_fixture,
    wait_for,
)

__all__ = ["browser_fixture", "page_fixture", "served_fixture"]  # the fixtures, found here by pytest


def _foreign_requests(driver: WebDriver, served: Served) -> list[str]:
    """What the page asked for outside its server (ReDoc's search worker is a blob: of its own origin)."""
    origin = served.base.split("/fsm/")[0]
    own = (origin + "/fsm/", "data:", "blob:" + origin + "/")
    urls = requested_urls(driver)
    assert urls
    return [url for url in urls if not url.startswith(own)]


def _console_errors(driver: WebDriver) -> list[str]:
    return [str(e["message"]) for e in browser_log(driver, "browser") if e["level"] in ("SEVERE", "WARNING")]


def test_swagger_ui_draws_every_operation_from_the_servers_own_files(page: WebDriver, served: Served) -> None:
    page.get(served.base + "docs")
    operations = wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"), "Swagger UI's operations")
    assert any("/v1/conversations" in o.text for o in operations)
    assert _foreign_requests(page, served) == []
    assert _console_errors(page) == []


def test_redoc_draws_every_operation_from_the_servers_own_files(page: WebDriver, served: Served) -> None:
    page.get(served.base + "redoc")
    wait_for(
        page,
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-section-id^='tag/'], [data-section-id^='operation/']"),
        "ReDoc's operations",
    )
    assert "/v1/conversations" in page.find_element(By.TAG_NAME, "body").text
    assert _foreign_requests(page, served) == []
    assert _console_errors(page) == []
