"""Measurers: a batch of placements in, results out in the same order, failures as values."""

from autoplace.measure.base import (
    ErrorKind,
    Event,
    MeasurementStopped,
    Measurer,
    MeasureResult,
)

__all__ = ["ErrorKind", "Event", "MeasureResult", "MeasurementStopped", "Measurer"]
