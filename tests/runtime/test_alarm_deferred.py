"""The step alarm's deferred sections (gymloop.runtime.alarm.deferred)."""

from __future__ import annotations

import time

import pytest

from gymloop.runtime.alarm import StepAlarm, StepTimeout, deferred


class AnyFrame:
    """An executor for which every frame is game code."""

    def alarm_may_raise(self, frame):
        return True


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_deadline_passing_inside_a_deferred_section_raises_right_after_it():
    alarm = StepAlarm(AnyFrame(), 0.01)
    done = []
    token = alarm.arm()
    try:
        with pytest.raises(StepTimeout):
            with deferred():
                with deferred():  # (nested sections)
                    spin(0.03)
                done.append("inner")
                spin(0.02)
                done.append("outer")
            spin(1.0)  # the alarm is acted on within a few ms of the section's end
            done.append("after")
    finally:
        alarm.disarm(token)
        alarm.release()
    assert done == ["inner", "outer"]


def test_without_a_section_the_deadline_raises_in_place():
    alarm = StepAlarm(AnyFrame(), 0.01)
    token = alarm.arm()
    t0 = time.monotonic()
    try:
        with pytest.raises(StepTimeout):
            spin(1.0)
    finally:
        alarm.disarm(token)
        alarm.release()
    assert time.monotonic() - t0 < 0.5
