"""Tuning logs: one versioned JSON line per measured candidate.

- :mod:`~autoplace.records.tuning_log` — the log written (``TuningLog``) and read (``read``,
  ``parse_lines``), its pandas view (``load``) and its best record (``best``);
- :mod:`~autoplace.records.schema` — what a line must hold, as every reader checks it
  (``check_line``).

``autoplace.TuningLog``, ``autoplace.Record``, ``autoplace.read`` and ``autoplace.load`` are
the first module's.
"""
