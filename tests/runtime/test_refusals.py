"""What the engine refuses before any model call, the same through every driver: nothing is saved."""

from __future__ import annotations

from typing import Any

import pytest

from llm_fsm import MessageLimits
from llm_fsm.errors import InvalidMessageError, MessageTooLargeError, UnsupportedContentError

from .drivers import Driver, instance_of
from .models import SUPPORT, Metered, Model, manager_for

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/receipt.png"}}


def refused_before_the_model(
    driver: Driver, model: Metered, error: type[Exception], message: Any, **kwargs: Any
) -> None:
    """Send ``message`` and check it is refused with ``error``, with no model call and nothing saved."""
    manager = manager_for(model, **kwargs)
    cid, _ = driver.start(manager, SUPPORT)
    version = instance_of(manager, cid).version
    with pytest.raises(error):
        driver.send(manager, cid, message)
    assert model.calls("turn") == 0 and instance_of(manager, cid).version == version


def test_a_message_over_the_size_limit_is_refused(driver: Driver) -> None:
    refused_before_the_model(driver, Metered(Model()), MessageTooLargeError, "x" * 101, max_input_chars=100)


def test_a_message_of_content_parts_over_the_size_limit_is_refused(driver: Driver) -> None:
    parts = [{"type": "text", "text": "x" * 60}, {"type": "text", "text": "y" * 60}]
    refused_before_the_model(driver, Metered(Model()), MessageTooLargeError, parts, max_input_chars=100)


def test_an_image_for_a_model_that_reads_only_text_is_refused(driver: Driver) -> None:
    model = Metered(Model(), reads_images=False)
    refused_before_the_model(driver, model, UnsupportedContentError, [{"type": "text", "text": "see"}, IMAGE])


def test_an_empty_list_of_content_parts_is_refused(driver: Driver) -> None:
    refused_before_the_model(driver, Metered(Model()), InvalidMessageError, [])


def test_a_content_part_of_an_unknown_type_is_refused(driver: Driver) -> None:
    refused_before_the_model(driver, Metered(Model()), InvalidMessageError, [{"type": "audio", "data": "..."}])


def test_text_holding_a_lone_surrogate_is_refused(driver: Driver) -> None:
    refused_before_the_model(driver, Metered(Model()), InvalidMessageError, "broken \ud800 text")


def test_metadata_over_its_size_limit_is_refused(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model, message_limits=MessageLimits(max_metadata_bytes=100))
    cid, _ = driver.start(manager, SUPPORT)
    with pytest.raises(MessageTooLargeError):
        driver.send(manager, cid, "hello", metadata={"blob": "x" * 101})
    assert model.calls("turn") == 0
