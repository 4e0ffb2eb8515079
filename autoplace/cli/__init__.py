"""The ``autoplace`` command line (``python -m autoplace``).

- :mod:`~autoplace.cli.main` — the parser and :func:`~autoplace.cli.main.main`; ``tune``,
  ``best``, ``profiles``, ``graph``; bad input as one line and exit code 2;
- :mod:`~autoplace.cli.options` — value types of options, and options several subcommands
  share;
- :mod:`~autoplace.cli.real_commands` — ``compile``, ``run``, ``serve`` and the real
  measurers of ``tune``; :mod:`~autoplace.cli.calibrate_command` — ``calibrate``;
  :mod:`~autoplace.cli.tune_kernels_command` — ``tune-kernels``;
- :mod:`~autoplace.cli.pipeline_commands` — ``pipeline`` and ``tune --objective throughput``
  on a mesh; :mod:`~autoplace.cli.pipeline_stages` — a pipeline's stage libraries built by
  ``compile`` and run by ``run DIR``;
- :mod:`~autoplace.cli.report_command` — ``report``; :mod:`~autoplace.cli.import_command` —
  ``import-instance``;
- :mod:`~autoplace.cli.tune_summary` — what ``tune`` prints when it ends.
"""
