"""The machine a shared library is built for, read from its ELF header (no TVM).

A library cross-compiled for a board cannot be loaded here; reading ``e_machine`` first
turns the loader's misleading "cannot open shared object file" into a one-line refusal.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

#: ``e_machine`` -> the architecture's name (as ``platform.machine()`` spells it)
MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 40: "arm", 62: "x86_64",
            183: "aarch64", 243: "riscv64"}
#: e_machine of an aarch64 library
AARCH64 = 183


def elf_machine(path: str | Path) -> int | None:
    """``e_machine`` of the ELF file at ``path``; None if it is not an ELF file."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] not in (1, 2):
        return None
    return struct.unpack_from("<H" if head[5] == 1 else ">H", head, 18)[0]


def machine_name(machine: int | None) -> str:
    """A readable name of an ``e_machine`` value."""
    return MACHINES.get(machine, f"machine {machine}") if machine is not None else "not ELF"


def host_machine() -> int | None:
    """``e_machine`` of this Python interpreter: what this process can load."""
    return elf_machine(sys.executable)


def foreign(path: str | Path) -> str | None:
    """The architecture of the library at ``path`` if this process cannot load it (built
    for another machine), else None."""
    machine, host = elf_machine(path), host_machine()
    if machine is None or host is None or machine == host:
        return None
    return machine_name(machine)
