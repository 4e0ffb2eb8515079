"""Save a Relax module for build workers: the IR as TVM JSON, the weights as binary tensors.

``tvm.ir.save_json`` writes constants as base64 text: 770 MB and 18 s for vgg19. Here the
constants of ``main`` become parameters while saving (the IR is then a few MB) and are
bound back as the same constants on loading.
"""

from __future__ import annotations

from pathlib import Path

import tvm
from tvm import relax

IR_FILE = "module.json"
WEIGHTS_FILE = "weights.params"


@relax.expr_functor.mutator
class _Unbind(relax.PyExprMutator):
    """Replaces every constant with a fresh Var ``__w<i>`` (one per distinct constant)."""

    def __init__(self, mod):
        super().__init__(mod)
        self.vars: list = []
        self.values: dict[str, object] = {}
        self.seen: dict = {}

    def visit_generic_const_(self, const):
        key = hash(const)  # the object's address: a constant used twice stays one weight
        if key not in self.seen:
            var = relax.Var(f"__w{len(self.vars)}", const.ty)
            self.vars.append(var)
            self.values[var.name] = const.value
            self.seen[key] = var
        return self.seen[key]


def save(mod: tvm.IRModule, directory: str | Path) -> Path:
    """Write ``mod`` into ``directory`` (created if needed); return the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    main = mod["main"]
    unbind = _Unbind(mod)
    body = unbind.visit_expr(main.body)
    params = list(main.params) + unbind.vars
    out = mod.clone()
    out["main"] = relax.Function(params, body, main.ret_ty, main.is_pure, main.attrs)
    (directory / IR_FILE).write_text(tvm.ir.save_json(out))
    (directory / WEIGHTS_FILE).write_bytes(tvm.runtime.save_param_dict(unbind.values))
    return directory


def load(directory: str | Path) -> tvm.IRModule:
    """The module :func:`save` wrote, its weights constants again."""
    directory = Path(directory)
    mod = tvm.ir.load_json((directory / IR_FILE).read_text())
    weights = tvm.runtime.load_param_dict((directory / WEIGHTS_FILE).read_bytes())
    if not weights:
        return mod
    return relax.transform.BindParams("main", dict(weights))(mod)
