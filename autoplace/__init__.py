"""autoplace: search-based auto-placement tuner for heterogeneous systems, on Apache TVM."""

__version__ = "0.1.0"
