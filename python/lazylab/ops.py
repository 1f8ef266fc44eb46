"""One function per op of lazylab's op table (plugins/include/lazylab/ops.def),
made from the table when lazylab is imported, so that no op is listed here
a second time:

    ops.add(a, b)                               # NumPy broadcasting, as the C++ API
    ops.reduce_sum(x, axes=[1], keepdim=True)   # attributes by their names in the table
    ops.cast(x, dtype=lazylab.f64)              # an op whose result type is declared

The leaves (parameter, constant, iota) are made by a Context: tensor(),
full(), iota(). Each elementwise op of one operand, and each composite of
one operand without attributes, is a Tensor method too: x.exp(), x.gelu().
"""

from . import _core


def _make(row):
    name, op_id = row["name"], row["id"]
    attribute_names = [attr for attr, _ in row["attrs"]]
    method = getattr(_core.Tensor, name, None)
    if row["arity"] == 1 and not row["attrs"] and not row["declared_type"] and method is not None:
        return method  # the Tensor method the module made from the same row: one call into C++

    def op(*operands, dtype=None, **attributes):
        return _core.apply(op_id, list(operands), attributes, dtype)

    signature = ", ".join(["*operands"] + [f"{attr}: {kind}" for attr, kind in row["attrs"]])
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{name}({signature}{', dtype' if row['declared_type'] else ''}): a {row['category']} op"
    op.attributes = attribute_names
    return op


TABLE = _core.op_table()
__all__ = []
for _row in TABLE:
    if _row["category"] == "leaf":
        continue
    globals()[_row["name"]] = _make(_row)
    __all__.append(_row["name"])
