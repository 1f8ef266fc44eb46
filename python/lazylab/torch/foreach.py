"""aten's _foreach_ ops (a list of tensors at once: what torch 2.x's
clip_grad_norm_ and optimizers call on plain tensors, so what make_fx and
AOTAutograd record) as their per-tensor op on each tensor of the list, each
through the lowering table again. A list argument gives each call its own
element; any other argument is given to every call."""

import torch

from .lowering import lowers

# foreach overload -> (per-tensor overload, {foreach argument: per-tensor argument})
ROWS = {"_foreach_norm.Scalar": ("linalg_vector_norm.default", {"ord": "ord", "dtype": "dtype"})}
for _name in ("mul", "add", "sub", "div"):
    for _inplace in ("_", ""):
        _op = _name + _inplace
        ROWS[f"_foreach_{_op}.Scalar"] = (f"{_op}.Scalar", {"scalar": "other"})
        ROWS[f"_foreach_{_op}.ScalarList"] = (f"{_op}.Scalar", {"scalars": "other"})
        ROWS[f"_foreach_{_op}.Tensor"] = (f"{_op}.Tensor", {"other": "other", "alpha": "alpha"})
        ROWS[f"_foreach_{_op}.List"] = (f"{_op}.Tensor", {"other": "other", "alpha": "alpha"})
for _inplace in ("_", ""):
    for _name in ("addcdiv", "addcmul"):
        ROWS[f"_foreach_{_name}{_inplace}.Scalar"] = (f"{_name}{_inplace}.default",
                                                       {"tensor1": "tensor1", "tensor2": "tensor2", "value": "value"})
        ROWS[f"_foreach_{_name}{_inplace}.ScalarList"] = (f"{_name}{_inplace}.default",
                                                           {"tensor1": "tensor1", "tensor2": "tensor2",
                                                            "scalars": "value"})
    ROWS[f"_foreach_lerp{_inplace}.Scalar"] = (f"lerp{_inplace}.Scalar", {"tensors1": "end", "weight": "weight"})
    ROWS[f"_foreach_lerp{_inplace}.List"] = (f"lerp{_inplace}.Tensor", {"tensors1": "end", "weights": "weight"})
    ROWS[f"_foreach_sqrt{_inplace}.default"] = (f"sqrt{_inplace}.default", {})
ROWS["_foreach_zero_.default"] = ("zero_.default", {})


def overload(name):
    packet, _, variant = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), variant)


def per_tensor_rule(foreach_name, per_tensor_name, renames):
    in_place = foreach_name.split(".")[0].endswith("_")

    def rule(c):
        op = overload(per_tensor_name)
        results = []
        for i, tensor in enumerate(c["self"]):
            kwargs = {}
            for name, target in renames.items():
                value = c.args.get(name)
                if value is not None:
                    kwargs[target] = value[i] if isinstance(value, (list, tuple)) else value
            results.append(op(tensor, **kwargs))
        return None if in_place else results

    return rule


for _foreach, (_per_tensor, _renames) in ROWS.items():
    lowers(_foreach)(per_tensor_rule(_foreach, _per_tensor, _renames))
