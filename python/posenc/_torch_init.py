"""posenc.torch's initialisation of a method's tensors: each method's reference, as the library
describes it (pe_param_spec.init), and torch.nn.Linear's for the projections."""
import ctypes
import math

import torch
from torch import nn

from posenc import _lib


def _get_slopes(n):
    """ALiBi's reference slopes of n heads, the library's (pe_alibi_slopes), so one copy exists."""
    m = (ctypes.c_double * int(n))()
    _lib.lib.pe_alibi_slopes(m, int(n))
    return list(m)


def _linear_default(t, fan_in):
    # torch.nn.Linear.reset_parameters: kaiming_uniform(a=sqrt(5)) == U(+-1/sqrt(fan_in))
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    return nn.init.uniform_(t, -bound, bound)


def init_tensor(method, name, t, settings, dim, heads):
    """Fills parameter t (method `method`, tensor `name`) as the method's reference does: the
    library's description of it (pe_param_spec.init, the one the trainer draws from too),
    drawn with torch's generator. Returns t."""
    s = {k: _lib.text(v, k) for k, v in settings.items()}
    s.update(method=method, heads=str(heads))
    kind, a, b = _lib.Layer(s, dim).inits()[name]
    with torch.no_grad():
        if kind == "normal":
            return nn.init.normal_(t, 0.0, a)
        if kind == "uniform":
            return nn.init.uniform_(t, a, b)
        if kind == "const":
            return nn.init.constant_(t, a)
        if kind == "xavier":
            return nn.init.xavier_normal_(t)
        if kind == "linear":  # torch.nn.Linear.reset_parameters: U(+-1/sqrt(fan_in))
            return nn.init.uniform_(t, -1 / math.sqrt(a), 1 / math.sqrt(a))
        if kind == "eye_normal":  # the identity on each [n, n] block plus N(0, a): FoPE starts as RoPE
            n = t.shape[-1]
            return t.copy_(torch.eye(n, dtype=t.dtype).expand_as(t) + a * torch.randn(t.shape, dtype=t.dtype))
        if kind == "alibi_slopes":
            return t.copy_(torch.tensor(_get_slopes(t.shape[0])))
        C = t.shape[-1]  # complex_freq: 10000^(-2 floor(d/2) / C) on every row
        d = torch.arange(C, dtype=torch.float64)
        return t.copy_((10000.0 ** (-2 * torch.div(d, 2, rounding_mode="floor") / C)).expand_as(t))
