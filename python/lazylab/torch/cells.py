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

A view whose base nothing else can reach (no tensor holds the base, no
other view shares it) stands alone: it takes its own value and lets the
base go, so a step does not compute and keep the base too. PyTorch hands
such views out as gradients: autograd gives .grad the transposed product
of a linear layer's backward without a copy, and every later step's
zero_() and add_() would otherwise write through it and keep both.
"""

import sys
import weakref


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
        _VIEWS.add(self)

    def stand_alone_if_base_unreachable(self, written=None):
        """Where the base is reachable through this view only, this view's
        value (or the value `written` to it) becomes its own, in a base of
        its own, and the old base goes: what the base held beyond this view
        (a slice's outside) nothing can read any more. A view that cannot
        be written (expand) is left as it is: standing alone it would have
        to take writes it refuses now."""
        # A base that is itself a view passes writes on to its own base,
        # which others may see: only a plain cell's reach is this view's.
        if self.inverse is None or type(self.base) is not Cell or _references(self.base) > _ALONE:
            return False
        base = Cell(self.value if written is None else written)
        base.version = self.base.version + (written is not None)
        self.base, self.forward, self.inverse = base, _same, _replaced
        self._value, self._seen = base.value, base.version
        return True

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
        if self.stand_alone_if_base_unreachable(written=value):
            return
        self.base.write(self.inverse(value, self.base.value))
        self._value, self._seen = value, self.base.version


def _same(value):
    return value


def _replaced(value, base):
    return value


def _references(cell):
    return sys.getrefcount(cell)


class _Probe:
    __slots__ = ("base",)


def _alone():
    """_references() of a cell held by one view's slot and nothing else."""
    probe = _Probe()
    probe.base = Cell(None)
    return _references(probe.base)


_ALONE = _alone()
_VIEWS = weakref.WeakSet()  # every live view, for release_unreachable_bases()


def release_unreachable_bases():
    """Each live view whose base only it reaches stands alone (at a step's
    end, before the step's values are computed: the bases then are not)."""
    for view in list(_VIEWS):
        view.stand_alone_if_base_unreachable()


class WriteThroughView(Exception):
    def __init__(self, op):
        super().__init__(op)
        self.op = op
