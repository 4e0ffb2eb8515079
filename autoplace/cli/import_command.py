"""Subcommand ``import-instance``: a published placement instance as a graph and a profile."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    """Add ``import-instance`` to the ``autoplace`` parser."""
    i = sub.add_parser("import-instance",
                       help="a placement instance of Tarnawski et al. (NeurIPS 2020) as a "
                            "profiled graph (.json) and a profile (.toml) to tune")
    i.add_argument("instance", help="a bundled instance (e.g. ops-bert_l-3) or a path to one "
                                    "in their JSON format")
    i.add_argument("--out", default=".", help="directory to write NAME.json and NAME.toml in")
    i.set_defaults(run=cmd_import)


def cmd_import(args) -> int:
    """Write the graph and the profile, and say how to tune them."""
    from autoplace.frontend.tarnawski import load_instance, profile_toml

    graph, profile = load_instance(args.instance)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    graph_path, profile_path = out / f"{graph.name}.json", out / f"{graph.name}.toml"
    graph.save(graph_path)
    profile_path.write_text(profile_toml(profile))
    fpgas = sum(u.execution == "block" for u in profile.units)
    print(f"{graph.name}: {len(graph.ops)} ops, {len(graph.edges)} edges, {fpgas} accelerators "
          f"-> {graph_path}, {profile_path}")
    print(f"next: autoplace tune {graph_path} --hw {profile_path} --trials 1000")
    return 0
