"""Where a lazy tensor's value lives, so that PyTorch's in-place ops and
aliases keep their meaning on a functional trace (functionalization).

A Cell holds a value (a lazylab tensor). An in-place op gives its tensor's
cell a new value; detach() and alias() share the cell, so a write through
either is seen by both, as in PyTorch. A view (view, reshape, t, transpose,
permute) has a ViewCell: its value is derived from its base's, again after
each write to the base, and a write through the view writes the base (by
the view's inverse), so the base and its other views see it. A view without
an inverse (expand, slices for now) refuses writes with an error naming the
op: never a wrong answer.
"""


class Cell:
    __slots__ = ("_value", "version", "__weakref__")

    def __init__(self, value):
        self._value = value
        self.version = 0

    @property
    def value(self):
        return self._value

    def write(self, value):
        self._value = value
        self.version += 1


class ViewCell:
    """A view of `base`: forward(base value) -> this value; inverse(this
    value, base value) -> the base's value after a write to this view (None:
    the view cannot be written)."""

    __slots__ = ("base", "forward", "inverse", "op", "_value", "_seen", "__weakref__")

    def __init__(self, base, forward, inverse, op):
        self.base = base  # a view of a view writes through both
        self.forward, self.inverse, self.op = forward, inverse, op
        self._value, self._seen = None, -1

    @property
    def version(self):
        return self.base.version

    @property
    def value(self):
        if self._seen != self.base.version or self._value is None:
            self._value = self.forward(self.base.value)
            self._seen = self.base.version
        return self._value

    def write(self, value):
        if self.inverse is None:
            raise WriteThroughView(self.op)
        self.base.write(self.inverse(value, self.base.value))
        self._value, self._seen = value, self.base.version


class WriteThroughView(Exception):
    def __init__(self, op):
        super().__init__(op)
        self.op = op
