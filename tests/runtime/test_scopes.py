"""The batch scopes an environment executor enters (gymloop.runtime.scopes)."""

from __future__ import annotations

import contextlib

import pytest

from gymloop.runtime import scopes


def test_registered_scopes_are_entered_in_order_and_left_however_the_batch_ends(monkeypatch):
    monkeypatch.setattr(scopes, "_SCOPES", [])
    assert isinstance(scopes.batch_scope(), contextlib.nullcontext)
    log: list[str] = []

    class Reentrant:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append("enter " + self.name)

        def __exit__(self, *exc):
            log.append("exit " + self.name)

    a, b = Reentrant("a"), Reentrant("b")
    scopes.register_batch_scope(a)
    scopes.register_batch_scope(a)  # (once however often registered)
    assert scopes.batch_scope() is a
    scopes.register_batch_scope(b)
    with pytest.raises(KeyError):
        with scopes.batch_scope():
            log.append("batch")
            raise KeyError("a copy failed")
    assert log == ["enter a", "enter b", "batch", "exit b", "exit a"]
