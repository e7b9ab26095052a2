"""The op sweep run by test_torch_npu.py::test_common_ops_match_cpu (on the simulator) and
test_l2_torch_npu.py::test_common_ops_every_launch_captured (under L2): each op on torch_npu
against CPU torch; prints {"bad": [names that differ], "n": count}."""

import json
from functools import partial

import torch
import torch.nn.functional as F
import torch_npu  # noqa: F401  (registers the npu device)


def grad_of(f, x):
    x = x.detach().requires_grad_()
    f(x).sum().backward()
    return x.grad


def T(v, like):  # an index (int64) or value tensor on `like`'s device
    t = torch.tensor(v)
    return t.to(like.device) if t.is_floating_point() else t.long().to(like.device)


def setitem(t, idx, v):
    t[idx] = v
    return t


def qkv(t):  # query, key, value [1, 1, 3, 8] from one [4, 6] tensor (torch_npu's fused path wants D % 8 == 0)
    return t.reshape(1, 1, 3, 8), t.flip(0).reshape(1, 1, 3, 8), (t * 0.5).roll(1, 1).reshape(1, 1, 3, 8)


def amp_unscale(grads):
    found = torch.zeros(1, device=grads[0].device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), 0.25, device=found.device))
    return torch.cat([found, *(g.flatten() for g in grads)])


def amp_update(y):  # an inf step (backoff), two clean steps reaching the interval (growth)
    scale, tracker = torch.full((1,), 8.0, device=y.device), torch.zeros(1, dtype=torch.int32, device=y.device)
    out = []
    for found in (1.0, 0.0, 0.0, 0.0):
        torch._amp_update_scale_(scale, tracker, torch.full((1,), found, device=y.device), 2.0, 0.5, 2)
        out += [scale.clone(), tracker.float()]
    return torch.cat(out)


def random_checks(like):
    """torch.rand / randn / randint / uniform_ on `like`'s device: properties any generator has (ranges,
    moments within 5 sigma of 20000 draws, a seed replaying its draws, torch.equal), as 1/0 flags."""
    d, n = like.device, 20000
    torch.manual_seed(7)
    r, g = torch.rand(n, device=d), torch.randn(n, device=d)
    k, h = torch.randint(3, 9, (n,), device=d), torch.empty(n, dtype=torch.float16, device=d).uniform_(-2, 3)
    torch.manual_seed(7)
    again = torch.rand(n, device=d)
    flags = [r.min() >= 0, r.max() < 1, (r.mean() - 0.5).abs() < 0.011, g.mean().abs() < 0.036]
    flags += [(g.std() - 1).abs() < 0.026, k.min() == 3, k.max() == 8, h.min() >= -2, h.max() < 3]
    flags += [torch.tensor(torch.equal(r, again), device=d), torch.tensor(not torch.equal(r, g), device=d)]
    return torch.stack(flags).float()


def vi(pair):  # values and indices in one float tensor (torch_npu has no float64)
    return torch.cat([pair[0], pair[1].float()])


torch.manual_seed(0)
xc, yc, ic = torch.randn(4, 6), torch.randn(4, 6), torch.randint(-5, 5, (4, 6))
xc[0, 0], xc[1, 1], xc[2, 2], xc[0, 1] = float("nan"), float("inf"), -float("inf"), 0.5
ops = {
    "eq": lambda x, y, i: x == y,
    "eq_self": lambda x, y, i: x == x,
    "ne_s": lambda x, y, i: x != 0.5,
    "gt": lambda x, y, i: x > y,
    "gt_s": lambda x, y, i: x > 0,
    "ge_s": lambda x, y, i: x >= 0.5,
    "lt": lambda x, y, i: x < y[0],
    "le_s": lambda x, y, i: x <= -1,
    "eq_int": lambda x, y, i: i == 0,
    "where": lambda x, y, i: torch.where(x > 0, x, y),
    "masked_fill": lambda x, y, i: x.masked_fill(x > 0, 0.0),
    "bool_sum": lambda x, y, i: (x > 0).sum(),
    "not": lambda x, y, i: ~(x > y),
    "isnan": lambda x, y, i: x.isnan(),
    "sin": lambda x, y, i: y.sin(),
    "cos": lambda x, y, i: y.cos(),
    "floor": lambda x, y, i: x.floor(),
    "round": lambda x, y, i: (y * 4).round(),
    "reciprocal": lambda x, y, i: y.reciprocal(),
    "sign": lambda x, y, i: y.sign(),
    "clamp": lambda x, y, i: y.clamp(-0.5, 0.5),
    "abs": lambda x, y, i: x.abs(),
    "exp": lambda x, y, i: y.exp(),
    "softmax": lambda x, y, i: y.softmax(-1),
    "maximum": lambda x, y, i: torch.maximum(x, y),
    "minimum": lambda x, y, i: torch.minimum(x, y[0]),
    "and": lambda x, y, i: (x > 0) & (y > 0),
    "or": lambda x, y, i: (x > 0) | (y > 0),
    "any": lambda x, y, i: (x > 2).any(),
    "all": lambda x, y, i: (y > -9).all(),
    "any_dim": lambda x, y, i: (x > 0).any(1),
    "isfinite": lambda x, y, i: x.isfinite(),
    "index_select": lambda x, y, i: y.index_select(1, torch.tensor([5, 0, 5], device=y.device)),
    "gather": lambda x, y, i: y.gather(1, torch.tensor([[0, 1]] * 4, device=y.device)),
    "remainder": lambda x, y, i: x.remainder(0.7),
    "remainder_t": lambda x, y, i: torch.remainder(y * 3, y[0]),
    "fmod": lambda x, y, i: torch.fmod(x, -0.7),
    # int64 beyond 2^53: computed exactly (the f64 path rounded 2^60 + 1 to 2^60)
    "int64_big_add": lambda x, y, i: T([2**60 + 1, -(2**60) - 3, 2**62], y) + T([1, 2, 2**62], y) * 3,
    "int64_big_full": lambda x, y, i: torch.full((2,), 2**60 + 1, device=y.device) - 1,
    "int64_big_rem": lambda x, y, i: T([2**60 + 1, -(2**60) - 1], y) % 7,
    "int64_big_bool": lambda x, y, i: T([2**60 + 1, 3], y) + (T([1, 0], y) > 0),
    "int64_big_moves": lambda x, y, i: torch.where(
        T([1, 0], y) > 0,
        torch.cat([T([2**60 + 1], y), T([-(2**60) - 3], y)]),
        T([[2**60 + 5], [7]], y).expand(2, 2).clone(),
    ),
    "int64_to_int32_wraps": lambda x, y, i: T([2**40 + 5, -(2**40) - 7], y).int(),
    # gathers, comparisons and extremes of int64 beyond 2^53: exact (they rounded through f64)
    "int64_big_gathers": lambda x, y, i: torch.cat(
        [
            T([2**60 + 1, 2**60 + 3, -(2**60) - 5, 7], y).index_select(0, T([2, 0, 1], y)),
            T([[2**60 + 1, 2**60 + 3], [-(2**60) - 5, 7]], y).gather(1, T([[1, 0], [0, 0]], y)).flatten(),
            torch.stack([T([2**60 + 1, 5], y), T([2**60 + 3, 6], y)]).flatten(),
            T([2**60 + 1, 2**60 + 3], y).repeat(2),
        ]
    ),
    "int64_big_compare": lambda x, y, i: torch.stack(
        [
            T([2**60 + 1, 2**60 + 3, 2**60 + 9], y) == T([2**60 + 2, 2**60 + 3, 2**60 + 8], y),
            T([2**60 + 1, 2**60 + 3, 2**60 + 9], y) < T([2**60 + 2, 2**60 + 3, 2**60 + 8], y),
            T([2**60 + 1, 2**60 + 3, 2**60 + 9], y) >= T([2**60 + 2, 2**60 + 3, 2**60 + 8], y),
            T([2**60 + 1, 2**60 + 3, -(2**60) - 5], y) > 5,
        ]
    ),
    "int64_big_extremes": lambda x, y, i: torch.stack(
        [
            T([2**60 + 1, 2**60 + 3, 2**60 + 2], y).max(),
            T([-(2**60) - 1, -(2**60) - 3, 5], y).min(),
            torch.maximum(T([2**60 + 1], y), T([2**60 + 2], y))[0],
            torch.minimum(T([2**60 + 1], y), T([2**60 + 2], y))[0],
        ]
    ),
    "float_plus_big_int": lambda x, y, i: y + (2**60 + 1),  # a float tensor takes the integer rounded
    "silu": lambda x, y, i: F.silu(x),
    "lerp": lambda x, y, i: torch.lerp(y, x, 0.3),
    "lerp_t": lambda x, y, i: torch.lerp(y, y * 2, y.sigmoid()),
    "cumsum": lambda x, y, i: x.cumsum(1),
    "flip": lambda x, y, i: x.flip(0, 1),
    "roll": lambda x, y, i: x.roll(2, 1),
    "roll_flat": lambda x, y, i: y.roll(-3),
    "sort": lambda x, y, i: vi(x.sort(1)),
    "sort_desc": lambda x, y, i: x.sort(0, descending=True)[0],
    "argsort": lambda x, y, i: y.argsort(1),
    "topk": lambda x, y, i: vi(y.topk(3, 1)),
    "argmax": lambda x, y, i: x.argmax(1),
    "argmin": lambda x, y, i: y.argmin(0),
    "max_dim": lambda x, y, i: vi(x.max(1)),
    "min_dim": lambda x, y, i: y.min(0, keepdim=True)[0],
    "var": lambda x, y, i: y.var(1),
    "std": lambda x, y, i: y.std(),
    "var_nan": lambda x, y, i: x.var(0, unbiased=False),
    "prod": lambda x, y, i: y.prod(1),
    "prod_all": lambda x, y, i: y.prod(),
    "logsumexp": lambda x, y, i: x.logsumexp(1),
    "mse": lambda x, y, i: F.mse_loss(y, y.flip(0)),
    "mse_sum": lambda x, y, i: F.mse_loss(y, x, reduction="sum"),
    "scatter": lambda x, y, i: y.scatter(1, torch.tensor([[5, 0]] * 4, device=y.device), x),
    "scatter_value": lambda x, y, i: y.scatter(0, torch.tensor([[3, 0, 1]], device=y.device), 2.5),
    "scatter_add": lambda x, y, i: y.scatter_add(1, torch.tensor([[1, 1, 4]] * 4, device=y.device), y),
    "gather_bw": lambda x, y, i: grad_of(lambda t: t.gather(1, torch.tensor([[2, 2]] * 4, device=t.device)), y),
    "silu_bw": lambda x, y, i: grad_of(F.silu, y),
    "mse_bw": lambda x, y, i: grad_of(lambda t: F.mse_loss(t, y.flip(1)), y),
    "index": lambda x, y, i: y[T([0, 3, -1], y)],
    "index2": lambda x, y, i: y[T([0, 2], y), T([5, -6], y)],
    "index_col": lambda x, y, i: x[:, T([1, 1, 4], x)],
    "index_int": lambda x, y, i: i[T([[1], [2]], i), T([0, 3], i)],
    "index_put": lambda x, y, i: y.index_put((T([0, 2], y),), T(1.5, y)),
    "index_put_acc": lambda x, y, i: y.index_put((T([0, 0, 3], y), T([1, 1, 2], y)), T([1.0, 2.0, 3.0], y), True),
    "setitem": lambda x, y, i: setitem(y.clone(), (slice(None), T([2, 0], y)), y[:, :2] * 10),
    "index_bw": lambda x, y, i: grad_of(lambda t: t[T([1, 1, 3], t)] * 2, y),
    "nonzero": lambda x, y, i: (x > 0).nonzero(),
    "nonzero_0d": lambda x, y, i: y[1, 1].nonzero(),
    "mask_set": lambda x, y, i: setitem(y.clone(), y > 0.5, 9.0),
    # x[mask] and masked_select: aclnnNonzeroV2 / aclnnMaskedSelect (kernel-decided output shapes)
    "mask_read": lambda x, y, i: x[x > 0],
    "mask_read_int": lambda x, y, i: i[i < 0],
    "mask_read_bw": lambda x, y, i: grad_of(lambda t: t[t > 0.5] * 3, y),
    "masked_select": lambda x, y, i: torch.masked_select(y, y[0] > 0),
    "masked_select_none": lambda x, y, i: torch.masked_select(y, y > 100),
    # floor / trunc division (aclnnFloorDivide(s), aclnnDivMod(s)), integer neg/abs/sign, inf norms (aclop
    # LpNormReduceV2's p = INT32_MAX / INT32_MIN), median of all elements (aclop Fill of a 0-d y with dims [1])
    "floordiv_int": lambda x, y, i: i // 3,
    "floordiv_int_t": lambda x, y, i: i // T([2, -3, 4, -1, 5, 7], i),
    "floordiv_f": lambda x, y, i: y // 0.3,
    "floordiv_f_t": lambda x, y, i: torch.floor_divide(y, x),
    "div_floor": lambda x, y, i: torch.div(y, x, rounding_mode="floor"),
    "div_trunc": lambda x, y, i: torch.div(y, -0.7, rounding_mode="trunc"),
    "div_trunc_int": lambda x, y, i: torch.div(i, 3, rounding_mode="trunc"),
    "ifloordiv": lambda x, y, i: y.clone().floor_divide_(0.25),
    "neg_int": lambda x, y, i: -i,
    "abs_int": lambda x, y, i: i.abs(),
    "sign_int": lambda x, y, i: i.sign(),
    "aminmax": lambda x, y, i: torch.stack(torch.aminmax(y)),
    "aminmax_dim": lambda x, y, i: torch.cat(torch.aminmax(y, dim=1, keepdim=True), 1),
    "nan_to_num": lambda x, y, i: torch.nan_to_num(x / (y - y[0, 0]), nan=0.5, posinf=7.0, neginf=-7.0),
    "norm_p2_dim": lambda x, y, i: torch.norm(y, p=2, dim=1),
    "norm_inf": lambda x, y, i: torch.stack([y.norm(p=float("inf")), y.norm(p=-float("inf")), y.norm(p=3)]),
    "norm_inf_dim": lambda x, y, i: torch.linalg.vector_norm(y, ord=float("inf"), dim=1),
    "median_all": lambda x, y, i: y.median(),
    # clamp with one bound or tensor bounds (aclnnClampMin/Max, aclnnClampTensor, ...): F.normalize, cosine_similarity
    "clamp_min": lambda x, y, i: y.clamp_min(0.1),
    "clamp_max_": lambda x, y, i: y.clone().clamp_max_(0.2),
    "clamp_t": lambda x, y, i: torch.clamp(x, min=y[0] - 1, max=y),
    "clamp_min_t": lambda x, y, i: torch.clamp(y, min=x),
    "clamp_max_t_": lambda x, y, i: y.clone().clamp_max_(x[1]),
    "normalize": lambda x, y, i: F.normalize(y, dim=1),
    "cosine_similarity": lambda x, y, i: F.cosine_similarity(y, y.flip(0)),
    # rsqrt (hand-written RMSNorm), trunc, masked_fill with a tensor value (also max()'s backward)
    "rsqrt": lambda x, y, i: torch.rsqrt(y.abs() + 0.1),
    "rmsnorm": lambda x, y, i: y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6),
    "trunc": lambda x, y, i: (y * 3).trunc(),
    "masked_fill_t": lambda x, y, i: y.masked_fill(y > 0, y[0, 0]),
    "max_bw": lambda x, y, i: grad_of(lambda t: t.max(), y),
    # unique / unique_consecutive: aclnnUnique2 / aclnnUniqueConsecutive (kernel-decided output shapes)
    "unique_int": lambda x, y, i: i.unique(),
    "unique_all": lambda x, y, i: torch.cat([t.flatten() for t in i.unique(return_inverse=True, return_counts=True)]),
    "unique_nan_inf": lambda x, y, i: x.unique(),
    "unique_consecutive": lambda x, y, i: torch.cat(torch.unique_consecutive((i > 0).long(), return_counts=True)),
    "unique_consecutive_dim": lambda x, y, i: torch.cat(torch.unique_consecutive(i[0], return_counts=True, dim=0)),
    "unique_consecutive_inv": lambda x, y, i: torch.unique_consecutive(
        (i > 2).long() - (i < -2).long(), return_inverse=True
    )[1],
    "expm1": lambda x, y, i: x.expm1(),
    "log1p": lambda x, y, i: y.abs().log1p(),
    "log2": lambda x, y, i: x.log2(),
    "log10": lambda x, y, i: y.abs().log10(),
    "ceil": lambda x, y, i: (x * 3).ceil(),
    "tan": lambda x, y, i: y.tan(),
    "atan": lambda x, y, i: x.atan(),
    "asin": lambda x, y, i: (y / 3).asin(),
    "acos": lambda x, y, i: (y / 3).acos(),
    "sinh": lambda x, y, i: y.sinh(),
    "cosh": lambda x, y, i: y.cosh(),
    "expm1_bw": lambda x, y, i: grad_of(torch.expm1, y),
    "hardswish": lambda x, y, i: F.hardswish(x * 3),
    "hardswish_bw": lambda x, y, i: grad_of(F.hardswish, y * 3),
    "mish": lambda x, y, i: F.mish(x),
    "mish_bw": lambda x, y, i: grad_of(F.mish, y),
    "logsigmoid": lambda x, y, i: F.logsigmoid(x),
    "logsigmoid_bw": lambda x, y, i: grad_of(F.logsigmoid, y * 3),
    "leaky_relu": lambda x, y, i: F.leaky_relu(x, 0.1),
    "leaky_relu_bw": lambda x, y, i: grad_of(lambda t: F.leaky_relu(t, 0.3), x),
    "relu6": lambda x, y, i: F.relu6(x * 4),
    # not on x: CPU torch's hardtanh_backward gives NaN 0 in its vector loop and 1 in its scalar tail
    "relu6_bw": lambda x, y, i: grad_of(F.relu6, y * 4),
    "hardtanh": lambda x, y, i: F.hardtanh(x, -0.5, 0.25),
    "hardtanh_bw": lambda x, y, i: grad_of(lambda t: F.hardtanh(t, -0.5, 0.25), y),
    "softplus": lambda x, y, i: F.softplus(x),
    "softplus_beta": lambda x, y, i: F.softplus(y * 3, beta=2, threshold=3),
    "softplus_bw": lambda x, y, i: grad_of(lambda t: F.softplus(t, 2, 3), y * 3),
    "elu": lambda x, y, i: F.elu(x),
    "elu_bw": lambda x, y, i: grad_of(F.elu, x),
    "selu": lambda x, y, i: F.selu(y),
    "selu_bw": lambda x, y, i: grad_of(F.selu, y),
    "pow_scalar_base": lambda x, y, i: 2**y,
    "pow_scalar_base_int": lambda x, y, i: 3 ** (i.abs() % 4),
    "rem_scalar_first": lambda x, y, i: 5 % y,
    "rem_scalar_first_int": lambda x, y, i: -7 % (i.abs() + 1),
    "relu6_": lambda x, y, i: F.relu6(x * 4, inplace=True),
    "hardtanh_": lambda x, y, i: F.hardtanh(y.clone(), -0.5, 0.25, inplace=True),
    "hardswish_": lambda x, y, i: F.hardswish(x * 3, inplace=True),
    "leaky_relu_": lambda x, y, i: F.leaky_relu(x.clone(), 0.1, inplace=True),
    "elu_": lambda x, y, i: F.elu(x.clone(), inplace=True),
    "selu_": lambda x, y, i: F.selu(y.clone(), inplace=True),
    "mish_": lambda x, y, i: F.mish(x.clone(), inplace=True),
    # backward from the in-place forward's result: selfIsResult / isResult
    "leaky_relu__bw": lambda x, y, i: grad_of(lambda t: F.leaky_relu(t * 1, 0.2, inplace=True), x),
    "elu__bw": lambda x, y, i: grad_of(lambda t: F.elu(t * 1, 0.7, inplace=True), y),
    "relu6__bw": lambda x, y, i: grad_of(lambda t: F.relu6(t * 4, inplace=True), y),
    "sigmoid_": lambda x, y, i: y.clone().sigmoid_(),
    "tanh_": lambda x, y, i: x.clone().tanh_(),
    "exp_": lambda x, y, i: y.clone().exp_(),
    "sqrt_": lambda x, y, i: x.clone().sqrt_(),
    "log_": lambda x, y, i: y.abs().log_(),
    "rsqrt_": lambda x, y, i: y.abs().rsqrt_(),
    "reciprocal_": lambda x, y, i: y.clone().reciprocal_(),
    "sin_cos_erf_": lambda x, y, i: torch.stack([y.clone().sin_(), y.clone().cos_(), y.clone().erf_()]),
    "round_ops_": lambda x, y, i: torch.stack([(y * 3).floor_(), (y * 3).round_(), (y * 3).trunc_(), (y * 3).ceil_()]),
    "expm1_log1p_": lambda x, y, i: torch.stack([y.clone().expm1_(), y.abs().log1p_()]),
    "pow_": lambda x, y, i: y.clone().pow_(3),
    "pow_sq_": lambda x, y, i: x.clone().pow_(2),
    # F.scaled_dot_product_attention → aclnnFlashAttentionScore(Grad): plain, causal, a bool mask
    "sdpa": lambda x, y, i: F.scaled_dot_product_attention(*qkv(y)),
    "sdpa_causal": lambda x, y, i: F.scaled_dot_product_attention(*qkv(y), is_causal=True),
    "sdpa_mask": lambda x, y, i: F.scaled_dot_product_attention(*qkv(y), attn_mask=y[:3, :3] > -0.5),
    "sdpa_bw": lambda x, y, i: grad_of(lambda t: F.scaled_dot_product_attention(*qkv(t), is_causal=True), y),
    # losses: forward (mean, sum, none, weighted) and backward
    "bce": lambda x, y, i: F.binary_cross_entropy(y.sigmoid(), (y > 0).float()),
    "bce_w": lambda x, y, i: F.binary_cross_entropy(y.sigmoid(), (y > 0.5).float(), weight=y.abs(), reduction="sum"),
    "bce_bw": lambda x, y, i: grad_of(lambda t: F.binary_cross_entropy(t.sigmoid(), (y > 0).float()), y),
    "bce_logits": lambda x, y, i: F.binary_cross_entropy_with_logits(y * 3, (y > 0).float()),
    "bce_logits_pw": lambda x, y, i: F.binary_cross_entropy_with_logits(
        y, (y > 0.2).float(), pos_weight=y[0].abs() + 0.5, reduction="none"
    ),
    "bce_logits_bw": lambda x, y, i: grad_of(
        lambda t: F.binary_cross_entropy_with_logits(t, (y > 0).float(), pos_weight=y[0].abs()), y
    ),
    "smooth_l1": lambda x, y, i: F.smooth_l1_loss(y, y.flip(0) * 2),
    "smooth_l1_beta": lambda x, y, i: F.smooth_l1_loss(y, y.flip(1), beta=0.3, reduction="none"),
    "smooth_l1_bw": lambda x, y, i: grad_of(lambda t: F.smooth_l1_loss(t, y.flip(0) * 2, beta=0.5), y),
    "l1": lambda x, y, i: F.l1_loss(y, y.flip(0)),
    "l1_bw": lambda x, y, i: grad_of(lambda t: F.l1_loss(t, y.flip(0), reduction="sum"), y),
    "kl_div": lambda x, y, i: F.kl_div(y.log_softmax(-1), y.flip(0).softmax(-1), reduction="batchmean"),
    "kl_div_log": lambda x, y, i: F.kl_div(
        y.log_softmax(-1), y.flip(0).log_softmax(-1), reduction="sum", log_target=True
    ),
    "kl_div_bw": lambda x, y, i: grad_of(
        lambda t: F.kl_div(t.log_softmax(-1), y.flip(0).softmax(-1), reduction="sum"), y
    ),
    # clip_grad_value_ (foreach clamp_min / clamp_max), NaN kept
    "foreach_clamp": lambda x, y, i: torch.cat(
        [*torch._foreach_clamp_min(torch._foreach_clamp_max([x, y.abs()], 0.5), -0.25), x.clamp(-0.25, 0.5)]
    ),
    # GradScaler: unscale with the non-finite check (x holds NaN/inf), then the scale update after it
    "amp_unscale": lambda x, y, i: amp_unscale([x.clone(), y.clone()]),
    "amp_update_scale": lambda x, y, i: amp_update(y),
    # F.group_norm (nn.GroupNorm), forward and backward
    "group_norm": lambda x, y, i: F.group_norm(y.reshape(2, 4, 3), 2, y[0, :4], y[1, :4]),
    "group_norm_plain": lambda x, y, i: F.group_norm(y.reshape(1, 6, 2, 2), 3),
    "group_norm_bw": lambda x, y, i: grad_of(
        lambda t: F.group_norm(t.reshape(2, 4, 3), 2, y[0, :4]) * y.reshape(2, 4, 3), y
    ),
    "atan2": lambda x, y, i: torch.atan2(x, y.flip(0)),  # NaN and inf rows of x included
    "atan2_zeros": lambda x, y, i: torch.atan2(
        torch.tensor([0.0, -0.0, 0.0, -0.0]).to(x), T([0.0, 0.0, -0.0, -1.0], x)
    ),
    "atan2_": lambda x, y, i: y.clone().atan2_(x),
    "erfinv": lambda x, y, i: torch.erfinv(
        torch.cat([x.flatten(), y.flatten() / 3, T([1.0, -1.0, 0.999999, -0.0], x)])
    ),
    "erfinv_": lambda x, y, i: (y / 2.5).clamp(-1, 1).erfinv_(),
    "logical_xor": lambda x, y, i: torch.logical_xor(x, i),
    "random": lambda x, y, i: random_checks(x),
    "cumprod": lambda x, y, i: y.cumprod(1),
    "cumprod_int": lambda x, y, i: i.cumprod(0),
    "cumprod_dtype": lambda x, y, i: torch.cumprod(i, 1, dtype=torch.float32),
    "cumprod_bw": lambda x, y, i: grad_of(lambda t: t.cumprod(1), y),
    "linspace": lambda x, y, i: torch.linspace(-1.5, 2.5, 7, device=x.device),
    "linspace_int": lambda x, y, i: torch.linspace(0, 10, 4, device=x.device, dtype=torch.int64),
    "eye": lambda x, y, i: torch.eye(2, 4, device=x.device, dtype=torch.int32),
    # repeat_interleave (the Int, tensor and index-only forms), index_add, bincount, prelu, glu, isclose, nansum
    "repeat_interleave": lambda x, y, i: y.repeat_interleave(2, dim=0),
    "repeat_interleave_flat": lambda x, y, i: i.repeat_interleave(3),
    "repeat_interleave_tensor": lambda x, y, i: y.repeat_interleave(T([1, 0, 2, 3], i), dim=0),
    "repeat_interleave_index": lambda x, y, i: torch.repeat_interleave(T([2, 0, 3], i)),
    "repeat_interleave_bw": lambda x, y, i: grad_of(lambda t: t.repeat_interleave(2, dim=1) ** 2, y),
    "index_add": lambda x, y, i: y.index_add(0, T([0, 2, 0], i), y[1:] * 0.1, alpha=2.0),
    "index_add_int": lambda x, y, i: i.index_add(1, T([3, 1], i), i[:, :2]),
    "bincount": lambda x, y, i: torch.bincount(i.flatten() + 5),
    "bincount_weights": lambda x, y, i: torch.bincount(i.flatten() + 5, weights=y.flatten(), minlength=12),
    "prelu": lambda x, y, i: F.prelu(y.reshape(2, 3, 4), y[0, :3]),
    "prelu_bw": lambda x, y, i: grad_of(lambda t: F.prelu(t.reshape(2, 3, 4), y[0, :3] * 0.5) ** 2, y),
    "prelu_bw_weight": lambda x, y, i: grad_of(lambda w: F.prelu(y.reshape(2, 3, 4), w) ** 2, y[1, :3]),
    "glu": lambda x, y, i: F.glu(y, 0),
    "glu_bw": lambda x, y, i: grad_of(lambda t: F.glu(t) ** 2, y),
    "std_mean": lambda x, y, i: torch.cat([t.flatten() for t in torch.std_mean(y, 1)]),
    "std_mean_all_c0": lambda x, y, i: torch.stack(torch.std_mean(y, correction=0)),
    "dot": lambda x, y, i: torch.dot(y[0], y[1]),
    "kthvalue": lambda x, y, i: vi(y.kthvalue(3, 1)),
    "kthvalue_nan": lambda x, y, i: vi(x.kthvalue(6, 1, keepdim=True)),  # NaN above every number
    "cummax": lambda x, y, i: vi(x.cummax(1)),  # NaN stays, ties take the later index
    "cummax_ties": lambda x, y, i: vi(T([[1.0, 3.0, 3.0, 2.0, 5.0, 5.0]], x).cummax(1)),
    # review fixes: 0-d tensors, torch's quickselect ties, int64 beyond 2^53, float64 nansum, integer and
    # half linspace, integer / negative pads, uint8 nearest resizing
    "kthvalue_0d": lambda x, y, i: torch.stack([t.float() for t in y[0, 0].kthvalue(1)]),
    "index_fill_0d": lambda x, y, i: y[0, 0].clone().index_fill(0, T([0], i), 5.0),
    "index_add_0d": lambda x, y, i: y[0, 0].index_add(0, T([0], i), y[1, 1]),
    "kthvalue_ties": lambda x, y, i: vi(
        T([[5, 1, 1, 1, 1, 2, 2, 1, 1, 0], [0, -0.0, 0, -0.0, 1, 1, 1, 1, 1, 1]], x).kthvalue(3)
    ),
    "cummax_int64_big": lambda x, y, i: torch.cat(
        [t.flatten() for t in T([2**60 + 1, 2**60, 2**60 + 3, 2**60 + 2], i).cummax(0)]
    ),
    "kthvalue_int64_big": lambda x, y, i: T([2**60 + 3, 2**60 + 1, 2**60 + 2], i).kthvalue(2)[0],
    "dot_int64": lambda x, y, i: torch.dot(T([2**40, 3], i), T([2**20 + 1, 5], i)),
    "cross_int64_wraps": lambda x, y, i: torch.linalg.cross(T([[2**40, 3, 2**35]], i), T([[5, 2**30, 7]], i)),
    # (made on the host: torch_npu's `.double()` of an npu tensor allocates float32 here)
    "nansum_f64": lambda x, y, i: torch.nansum(x.cpu().masked_fill(x.cpu().isinf(), 2.0).double().to(x.device), 1),
    "linspace_int_frac": lambda x, y, i: torch.linspace(-7.9, 3.2, 6, dtype=torch.int32, device=x.device),
    "linspace_half": lambda x, y, i: torch.linspace(-3.3, 7.1, 37, dtype=torch.float16, device=x.device),
    "linspace_bf16": lambda x, y, i: torch.linspace(-3.3, 7.1, 37, dtype=torch.bfloat16, device=x.device),
    "pad_reflect_int": lambda x, y, i: F.pad(i.reshape(1, 4, 6).int(), (2, 2, 1, 1), mode="reflect"),
    "pad_negative": lambda x, y, i: F.pad(y.reshape(1, 4, 6), (-1, 2, 1, -2), mode="reflect"),
    "upsample_nearest_uint8": lambda x, y, i: F.interpolate(
        (i + 5).to(torch.uint8).reshape(1, 1, 4, 6), scale_factor=2
    ),
    "cross": lambda x, y, i: torch.linalg.cross(y.reshape(8, 3), y.flip(0).reshape(8, 3)),
    "cross_dim0": lambda x, y, i: torch.cross(y.reshape(3, 8), y.flip(1).reshape(3, 8), dim=0),
    "cdist": lambda x, y, i: torch.cdist(y.reshape(2, 3, 4), y.flip(0).reshape(2, 3, 4)),
    "cdist_p1_inf": lambda x, y, i: torch.cat(
        [torch.cdist(y[:2], y[2:], p=1), torch.cdist(y[:2], y[1:], p=float("inf"))], 1
    ),
    "shift_left": lambda x, y, i: i << 3,
    "shift_left_tensor": lambda x, y, i: i << (i.abs() % 5),
    "shift_right": lambda x, y, i: (i * 1000) >> T([1, 2, 3, 0, 70, 63], i),  # a shift past the width: the sign fill
    "index_fill": lambda x, y, i: y.index_fill(1, T([0, 2, -1], i), 1.5),
    "index_fill_": lambda x, y, i: i.clone().index_fill_(0, T([3, 1], i), -7),
    "isclose": lambda x, y, i: torch.isclose(x, x + 1e-6),
    "isclose_nan": lambda x, y, i: torch.isclose(x, x, equal_nan=True),
    "nansum": lambda x, y, i: torch.nansum(x.masked_fill(x.isinf(), 1.0), 1),
    # pooling, resizing and padding (aclnnAvgPool2d, AdaptiveAvgPool2d, UpsampleNearest2d(V2), UpsampleBilinear2d,
    # Reflection/ReplicationPad1d/2d), forward and backward (a squared output makes the gradient non-uniform)
    "avg_pool2d": lambda x, y, i: F.avg_pool2d(y.reshape(1, 1, 4, 6), 2),
    "avg_pool2d_pad_ceil": lambda x, y, i: F.avg_pool2d(
        y.reshape(1, 2, 3, 4), 3, 2, 1, ceil_mode=True, count_include_pad=False
    ),
    "avg_pool2d_bw": lambda x, y, i: grad_of(
        lambda t: F.avg_pool2d(t.reshape(2, 3, 4), (2, 3), 1, (1, 0), divisor_override=4) ** 2, y
    ),
    "adaptive_avg_pool2d": lambda x, y, i: F.adaptive_avg_pool2d(y.reshape(1, 1, 4, 6), (3, 4)),
    "adaptive_max_pool2d": lambda x, y, i: vi(F.adaptive_max_pool2d(x.reshape(1, 4, 6), (3, 4), return_indices=True)),
    "adaptive_max_pool2d_bw": lambda x, y, i: grad_of(
        lambda t: F.adaptive_max_pool2d(t.reshape(1, 2, 3, 4), 2) ** 2, y
    ),
    "adaptive_avg_pool2d_bw": lambda x, y, i: grad_of(
        lambda t: F.adaptive_avg_pool2d(t.reshape(1, 2, 3, 4), (2, 3)) ** 2, y
    ),
    "upsample_nearest": lambda x, y, i: F.interpolate(y.reshape(1, 2, 3, 4), scale_factor=2),
    "upsample_nearest_size": lambda x, y, i: F.interpolate(y.reshape(1, 2, 3, 4), size=(5, 7)),
    "upsample_nearest_bw": lambda x, y, i: grad_of(
        lambda t: F.interpolate(t.reshape(1, 2, 3, 4), scale_factor=1.5) ** 2, y
    ),
    "upsample_bilinear": lambda x, y, i: F.interpolate(y.reshape(1, 2, 3, 4), scale_factor=2, mode="bilinear"),
    "upsample_bilinear_ac": lambda x, y, i: F.interpolate(
        y.reshape(1, 2, 3, 4), size=(5, 3), mode="bilinear", align_corners=True
    ),
    "upsample_bilinear_bw": lambda x, y, i: grad_of(
        lambda t: F.interpolate(t.reshape(1, 2, 3, 4), size=(4, 7), mode="bilinear") ** 2, y
    ),
    "pad_reflect": lambda x, y, i: F.pad(y.reshape(1, 2, 3, 4), (1, 2, 2, 0), mode="reflect"),
    "pad_reflect_1d": lambda x, y, i: F.pad(y.reshape(2, 2, 6), (3, 1), mode="reflect"),
    "pad_reflect_bw": lambda x, y, i: grad_of(
        lambda t: F.pad(t.reshape(2, 3, 4), (2, 1, 1, 2), mode="reflect") ** 2, y
    ),
    "pad_replicate": lambda x, y, i: F.pad(y.reshape(1, 2, 3, 4), (3, 0, 1, 2), mode="replicate"),
    "pad_replicate_1d_bw": lambda x, y, i: grad_of(lambda t: F.pad(t.reshape(4, 6), (2, 4), mode="replicate") ** 2, y),
    # 1-D and transposed convolution (aclnnConvolution with 3-D tensors, transposed=true), both gradients
    "conv1d": lambda x, y, i: F.conv1d(y.reshape(1, 4, 6), y[:2].reshape(2, 2, 3), y[2, :2], padding=1, groups=2),
    "conv1d_bw_in": lambda x, y, i: grad_of(
        lambda t: F.conv1d(t.reshape(1, 4, 6), y[:2].reshape(2, 2, 3), stride=2, groups=2) * 3, y
    ),
    "conv1d_bw_w": lambda x, y, i: grad_of(lambda t: F.conv1d(y.reshape(2, 2, 6), t[:2].reshape(3, 2, 2)), y),
    "conv_transpose1d": lambda x, y, i: F.conv_transpose1d(y.reshape(2, 4, 3), y[:2].reshape(4, 3, 1), stride=2),
    "conv_transpose2d": lambda x, y, i: F.conv_transpose2d(
        y.reshape(1, 4, 2, 3), y[:2].reshape(4, 1, 3, 1), y[3, :1], stride=2, padding=1, output_padding=1
    ),
    "conv_transpose2d_bw_in": lambda x, y, i: grad_of(
        lambda t: F.conv_transpose2d(t.reshape(1, 4, 2, 3), y[:2].reshape(4, 1, 3, 1), stride=(1, 2)) ** 2, y
    ),
    "conv_transpose2d_bw_w": lambda x, y, i: grad_of(
        lambda t: F.conv_transpose2d(y.reshape(1, 4, 2, 3), t[:2].reshape(4, 3, 1, 1), dilation=2, groups=2), y
    ),
}


def rms_ref(x, g, eps=1e-6):  # y and rstd side by side (rstd: x's shape with the last dim 1)
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return torch.cat((x * rstd * g, rstd), -1)


def fast_gelu_ref(x):  # CANN's FastGelu formula
    return x / (1 + torch.exp(-1.702 * x.abs())) * torch.exp(0.851 * (x - x.abs()))


def swiglu_ref(x, dim):
    a, b = x.chunk(2, dim)
    return F.silu(a) * b


# Ops whose npu call has another CPU counterpart: (npu call, CPU call computing the same function).
# torch_npu sends F.gelu of either `approximate` mode to aclnnGelu / aclnnGeluBackward, which CANN computes in
# the tanh form (ops-nn activation/gelu, gelu_grad); torch_npu's own ops have no CPU kernel.
device_forms = {
    "gelu": (lambda x, y, i: F.gelu(y * 2), lambda x, y, i: F.gelu(y * 2, approximate="tanh")),
    "gelu_tanh": (lambda x, y, i: F.gelu(y * 2, approximate="tanh"),) * 2,
    "gelu_bw": (
        lambda x, y, i: grad_of(F.gelu, y * 2),
        lambda x, y, i: grad_of(partial(F.gelu, approximate="tanh"), y * 2),
    ),
    "gelu_tanh_bw": (lambda x, y, i: grad_of(partial(F.gelu, approximate="tanh"), y * 2),) * 2,
    # torch_npu's fused LLM ops (aclnnRmsNorm(+Grad), aclnnSwiGlu(+Grad)) against their documented formulas
    "npu_rms_norm": (
        lambda x, y, i: torch.cat(torch_npu.npu_rms_norm(y, y[1].abs(), 1e-6), 1),
        lambda x, y, i: rms_ref(y, y[1].abs()),
    ),
    "npu_rms_norm_bw_x": (
        lambda x, y, i: grad_of(lambda t: torch_npu.npu_rms_norm(t, y[1] + 1)[0] * y, y * 2),
        lambda x, y, i: grad_of(lambda t: rms_ref(t, y[1] + 1)[:, :6] * y, y * 2),
    ),
    "npu_rms_norm_bw_gamma": (
        lambda x, y, i: grad_of(lambda t: torch_npu.npu_rms_norm(y.reshape(2, 2, 6), t, 1e-5)[0] * 3, y[0]),
        lambda x, y, i: grad_of(lambda t: rms_ref(y.reshape(2, 2, 6), t, 1e-5)[..., :6] * 3, y[0]),
    ),
    "npu_swiglu": (lambda x, y, i: torch_npu.npu_swiglu(y, dim=-1), lambda x, y, i: swiglu_ref(y, -1)),
    "npu_swiglu_dim0_bw": (
        lambda x, y, i: grad_of(lambda t: torch_npu.npu_swiglu(t, dim=0) ** 2, y),
        lambda x, y, i: grad_of(lambda t: swiglu_ref(t, 0) ** 2, y),
    ),
    "npu_add_rms_norm": (
        lambda x, y, i: torch.cat(torch_npu.npu_add_rms_norm(y, y.flip(0), y[2])[::2], 1),
        lambda x, y, i: torch.cat((rms_ref(y + y.flip(0), y[2])[:, :6], y + y.flip(0)), 1),
    ),
    "npu_fast_gelu": (lambda x, y, i: torch_npu.npu_fast_gelu(y * 3), lambda x, y, i: fast_gelu_ref(y * 3)),
    "npu_fast_gelu_bw": (
        lambda x, y, i: grad_of(lambda t: torch_npu.npu_fast_gelu(t) ** 2, y * 3),
        lambda x, y, i: grad_of(lambda t: fast_gelu_ref(t) ** 2, y * 3),
    ),
    # the aclop ScaledMaskedSoftmax(Grad) torch_npu launches, against msprobe's / op-plugin's reference
    "npu_scaled_masked_softmax": (
        lambda x, y, i: torch_npu.npu_scaled_masked_softmax(y.reshape(1, 1, 4, 6), (y > 0.5).reshape(1, 1, 4, 6), 0.7),
        lambda x, y, i: torch.softmax(
            (y.reshape(1, 1, 4, 6) * 0.7).masked_fill((y > 0.5).reshape(1, 1, 4, 6), -10000), -1
        ),
    ),
    "npu_scaled_masked_softmax_triu_bw": (
        lambda x, y, i: grad_of(
            lambda t: (
                torch_npu.npu_scaled_masked_softmax(t.reshape(1, 1, 4, 6), (y < 9).reshape(1, 1, 4, 6), 2.0, True) ** 2
            ),
            y,
        ),
        lambda x, y, i: grad_of(
            lambda t: (
                torch.softmax((t.reshape(1, 1, 4, 6) * 2).masked_fill(torch.ones(4, 6).triu(1) > 0, -10000), -1) ** 2
            ),
            y,
        ),
    ),
    # the aclop ConfusionTransposeD (npu_confusion_transpose and its backward): a permute and a reshape
    "npu_confusion_transpose": (
        lambda x, y, i: torch_npu.npu_confusion_transpose(y.reshape(2, 2, 6), (1, 0, 2), (2, 12), True),
        lambda x, y, i: y.reshape(2, 2, 6).permute(1, 0, 2).reshape(2, 12),
    ),
    "npu_confusion_transpose_bw": (
        lambda x, y, i: grad_of(
            lambda t: torch_npu.npu_confusion_transpose(t, (2, 0, 1), (2, 3, 4), False) * y[0, 1], y
        ),
        lambda x, y, i: grad_of(lambda t: t.view(2, 3, 4).permute(2, 0, 1) * y[0, 1], y),
    ),
    "gelu_half": (
        lambda x, y, i: F.gelu(y.half()),
        lambda x, y, i: F.gelu(y.half().float(), approximate="tanh").half(),
    ),
}
bad = []
for n, (fn, fc) in {**{n: (f, f) for n, f in ops.items()}, **device_forms}.items():
    a, b = fn(xc.npu(), yc.npu(), ic.npu()).cpu(), fc(xc, yc, ic)
    if a.dtype != b.dtype:
        bad.append(n)
    elif not a.is_floating_point():  # integers and bools exactly (double() rounds int64 beyond 2^53)
        if not torch.equal(a, b):
            bad.append(n)
    elif not torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6, equal_nan=True):
        bad.append(n)
torch.npu.synchronize()
print(json.dumps({"bad": bad, "n": len(ops) + len(device_forms)}))
