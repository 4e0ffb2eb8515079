"""What a tuning log says, for people: pandas tables, pictures, HTML reports.

- :mod:`~autoplace.reports.analysis` — logs and simulated timelines as pandas tables;
- :mod:`~autoplace.reports.plots` — schedules and searches as matplotlib figures;
- :mod:`~autoplace.reports.placement_report` — the report of a tuning log's best placement;
- :mod:`~autoplace.reports.pipeline_report` — the report of a pipeline search's log.
"""
