"""A vendor's own patterns, named by entry point in a profile (tests of pattern tables)."""

from tvm.relax.dpl import is_op, wildcard


def max_pool():
    """A pool engine's pattern: a bare max_pool2d."""
    return is_op("relax.nn.max_pool2d")(wildcard())


def with_annotations():
    """TVM's pattern makers return (pattern, annotations): taken too."""
    data = wildcard()
    return is_op("relax.nn.max_pool2d")(data), {"data": data}


def not_a_pattern():
    return 3
