"""Subcommands of log analysis: report (issue 5)."""

from __future__ import annotations

from pathlib import Path

from autoplace.cli.options import input_shapes_arg, positive_int


def register(sub) -> None:
    """Add the analysis subcommands to the ``autoplace`` parser."""
    r = sub.add_parser("report", help="an HTML report of a tuning log, or of a pipeline "
                                      "search's log: tables and pictures")
    r.add_argument("log", help="tuning log (JSON lines)")
    r.add_argument("-o", "--out", default=None, help="output directory (default LOG-report/)")
    r.add_argument("--model", default=None,
                   help="the log's model, if not a bundled name (.onnx, .pt2 or graph .json)")
    r.add_argument("--hw", default=None, help="the log's profile, if not bundled (.toml)")
    input_shapes_arg(r)
    r.add_argument("--job", type=positive_int, default=None,
                   help="which job of a log holding several (graph, profile version, "
                        "measurer), numbered from 1 in order of appearance (default: the job "
                        "of the last record)")
    r.set_defaults(run=cmd_report)


def cmd_report(args) -> int:
    """Write the report and print where it is."""
    from autoplace.reports.pipeline_report import is_pipeline_log, write_pipeline_report
    from autoplace.reports.placement_report import write_report

    log = Path(args.log)
    out = Path(args.out) if args.out else log.with_name(f"{log.stem}-report")
    if is_pipeline_log(log):
        page = write_pipeline_report(log, out, model=args.model, hw=args.hw)
        print(f"report: {page} (pictures beside it)")
        return 0
    page, note = write_report(log, out, model=args.model, hw=args.hw, job=args.job,
                              shapes=args.input_shapes)
    if note:
        print(f"note: {note}")
    print(f"report: {page} (pictures beside it)")
    return 0
