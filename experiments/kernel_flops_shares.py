"""How many of each model's kernels ``tune-kernels --flops-share`` tunes: per model, its
distinct kernels for a unit's target (as ``tune-kernels`` counts them) and, per share, the
fewest of the heaviest that hold it, with the share they hold.

    python experiments/kernel_flops_shares.py [--models ...] [--unit cpu] [--shares 0.9 0.95 0.99]

Nothing is built or timed (seconds per model).
"""

from __future__ import annotations

import argparse

from autoplace.deploy.kernel_tuning import flops_share, heaviest, kernel_tasks
from autoplace.hardware.load import load_profile
from autoplace.models import load_module
from autoplace.runtime.layout import runtime_program
from autoplace.runtime.libraries import kernel_funcs

MODELS = ("squeezenet", "resnet50", "inception_v1", "densenet121", "bert_base")


def row(model: str, profile, unit: str, shares: list[float]) -> list[str]:
    mod, graph = load_module(model, None)
    program = runtime_program(mod, graph, profile)
    tasks = kernel_tasks(kernel_funcs(program), graph, profile, [unit])
    cells = []
    for share in shares:
        kept = heaviest(tasks, share)
        cells.append(f"{len(kept)} ({flops_share(kept, tasks):.1%})")
    return [model, str(len(tasks)), *cells]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--unit", default="cpu", help="a unit of the host profile")
    ap.add_argument("--shares", nargs="+", type=float, default=[0.9, 0.95, 0.99])
    args = ap.parse_args()
    head = ["model", "kernels", *(f"--flops-share {s:g}" for s in args.shares)]
    print(f"`python experiments/kernel_flops_shares.py` (host profile, unit {args.unit})\n")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    profile = load_profile("host")
    for model in args.models:
        print("| " + " | ".join(row(model, profile, args.unit, args.shares)) + " |",
              flush=True)


if __name__ == "__main__":
    main()
