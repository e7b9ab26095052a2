"""aclnnFlashAttentionScore / aclnnFlashAttentionScoreGrad against a numpy attention written the way CANN
describes its kernel (masked scores replaced by -FLT_MAX, softmax, dropout by a bit mask, dS not masked
again): every layout, grouped-query heads, sparse modes 0-4 with the token band (applied only with a mask),
explicit masks of each accepted shape, rows with every key masked (uniform, or 0 in the invalid-line mode:
innerPrecise 2 or a band that empties a row), dropout, the 8-wide softmaxMax/Sum outputs, and refusals."""

import numpy as np
import pytest

import cannsim_ctypes as cs

FLT_MAX = float(np.finfo(np.float32).max)
BIG = 2147483647


def band(sq, skv, mode, pre, nxt):
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    shift = skv - sq
    return {
        0: (j > i + nxt) | (j < i - pre),
        1: np.zeros((sq, skv), bool),
        2: j > i,
        3: j > i + shift,
        4: (j > i + shift + nxt) | (j < i + shift - pre),
    }[mode]


def masked_positions(b, n, sq, skv, mode, pre, nxt, mask):
    """Without a mask nothing is masked (CANN computes the full matrix); with one, the mode's band and, in
    modes 0 and 1, the mask itself. Also whether the band alone empties a row (the invalid-line mode)."""
    if mask is None:
        return np.zeros((b, n, sq, skv), bool), False
    bd = band(sq, skv, mode, pre, nxt)
    m = np.broadcast_to(bd, (b, n, sq, skv)).copy()
    if mode in (0, 1):
        m |= np.broadcast_to(mask.astype(bool), (b, n, sq, skv))
    return m, bool(bd.all(-1).any())


def reference(q, k, v, dy, masked, scale, keep=None, keep_prob=1.0, zero_rows=False):
    """Forward (out, max, sum) and backward (dq, dk, dv) in float64, q [B,N1,S,D], k/v [B,N2,S,D]."""
    g = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = np.where(masked, -FLT_MAX, np.einsum("bnid,bnjd->bnij", q, kr) * scale)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    sm = e.sum(-1, keepdims=True)
    p = e / sm
    full = masked.all(-1)
    if zero_rows:
        p[full] = 0
        sm[full] = FLT_MAX
    f = (keep if keep is not None else np.ones_like(p)) / keep_prob
    out = np.einsum("bnij,bnjd->bnid", p * f, vr)
    dp = np.einsum("bnid,bnjd->bnij", dy, vr) * f
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = np.einsum("bnij,bnjd->bnid", ds, kr) * scale
    dkr = np.einsum("bnij,bnid->bnjd", ds, q) * scale
    dvr = np.einsum("bnij,bnid->bnjd", p * f, dy)
    fold = lambda x: x.reshape(k.shape[0], k.shape[1], g, *x.shape[2:]).sum(2)  # noqa: E731
    return (out, m[..., 0], sm[..., 0]), (dq, fold(dkr), fold(dvr))


def to_layout(x, layout, sdim=2):
    """[B, N, S, D] → the layout's shape."""
    b, n, s, d = x.shape
    return {
        "BNSD": x,
        "BSND": x.transpose(0, 2, 1, 3),
        "BSH": x.transpose(0, 2, 1, 3).reshape(b, s, n * d),
        "SBH": x.transpose(2, 0, 1, 3).reshape(s, b, n * d),
    }[layout]


def from_layout(y, layout, shape):
    b, n, s, d = shape
    return {
        "BNSD": lambda: y,
        "BSND": lambda: y.transpose(0, 2, 1, 3),
        "BSH": lambda: y.reshape(b, s, n, d).transpose(0, 2, 1, 3),
        "SBH": lambda: y.reshape(s, b, n, d).transpose(1, 2, 0, 3),
    }[layout]()


class Fa:
    def __init__(self, acl, stream):
        self.acl, self.stream = acl, stream

    def t(self, x, dtype=cs.ACL_FLOAT):
        return self.acl.tensor(np.ascontiguousarray(x, np.float32), dtype=dtype)

    def run(
        self,
        q,
        k,
        v,
        dy,
        layout="BNSD",
        mode=0,
        pre=BIG,
        nxt=BIG,
        mask=None,
        scale=0.25,
        precise=0,
        drop=None,
        keep_prob=1.0,
    ):
        acl, st = self.acl, self.stream
        b, n, sq, _ = q.shape
        Q, K, V, DY = (self.t(to_layout(x, layout)) for x in (q, k, v, dy))
        M = acl.tensor(mask.astype(np.uint8), dtype=cs.ACL_BOOL) if mask is not None else None
        D = acl.tensor(drop, dtype=cs.ACL_UINT8) if drop is not None else None
        mx, sm = acl.tensor(shape=(b, n, sq, 8)), acl.tensor(shape=(b, n, sq, 8))
        so, out = acl.tensor(shape=(0,)), acl.tensor(shape=Q.shape)
        lay = layout.encode()
        acl.run(
            "FlashAttentionScore",
            Q,
            K,
            V,
            None,
            D,
            None,
            M,
            [],
            scale,
            keep_prob,
            pre,
            nxt,
            n,
            lay,
            precise,
            mode,
            mx,
            sm,
            so,
            out,
            stream=st,
        )
        dq, dk, dv = (acl.tensor(shape=x.shape) for x in (Q, K, V))
        dpse = acl.tensor(shape=(0,))
        acl.run(
            "FlashAttentionScoreGrad",
            Q,
            K,
            V,
            DY,
            None,
            D,
            None,
            M,
            mx,
            sm,
            so,
            out,
            [],
            scale,
            keep_prob,
            pre,
            nxt,
            n,
            lay,
            precise,
            mode,
            dq,
            dk,
            dv,
            dpse,
            stream=st,
        )
        f = lambda x, shape: from_layout(x.numpy(st).astype(np.float64), layout, shape)  # noqa: E731
        m8, s8 = mx.numpy(st), sm.numpy(st)
        assert (m8 == m8[..., :1]).all() and (s8 == s8[..., :1]).all()  # the value repeated 8 times
        return (f(out, q.shape), m8[..., 0], s8[..., 0]), (f(dq, q.shape), f(dk, k.shape), f(dv, v.shape))


@pytest.fixture
def fa(acl):
    return Fa(acl, acl.stream())


def data(rng, b=2, n1=4, n2=4, sq=5, skv=7, d=8):
    q = rng.standard_normal((b, n1, sq, d)).astype(np.float32).astype(np.float64)
    k, v = (rng.standard_normal((b, n2, skv, d)).astype(np.float32).astype(np.float64) for _ in range(2))
    dy = rng.standard_normal((b, n1, sq, d)).astype(np.float32).astype(np.float64)
    return q, k, v, dy


def check(got, want):
    for g, w, what in zip(got[0] + got[1], want[0] + want[1], ["out", "max", "sum", "dq", "dk", "dv"]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=what)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (3, 1)])
def test_layouts_and_grouped_heads(fa, layout, heads):
    q, k, v, dy = data(np.random.default_rng(1), n1=heads[0], n2=heads[1])
    masked, _ = masked_positions(2, heads[0], 5, 7, 0, BIG, BIG, None)
    check(fa.run(q, k, v, dy, layout=layout), reference(q, k, v, dy, masked, 0.25))


@pytest.mark.parametrize(
    "mode,pre,nxt,sq,skv",
    [
        (0, 1, 0, 5, 7),
        (0, BIG, 0, 6, 6),
        (0, 3, -2, 5, 7),
        (2, BIG, 0, 5, 7),
        (3, BIG, 0, 5, 7),
        (3, BIG, 0, 7, 4),
        (4, 2, 1, 4, 7),
    ],
)
@pytest.mark.parametrize("precise", [0, 2])
def test_sparse_modes_and_fully_masked_rows(fa, mode, pre, nxt, sq, skv, precise):
    """Modes 2-4 with CANN's compressed mask, mode 0 with an all-False mask (the band alone). Mode 3 with
    Sq > Skv and mode 0 with nextTokens -2 leave rows without keys: the call runs in the invalid-line mode
    (those rows 0, sum FLT_MAX) whatever innerPrecise."""
    q, k, v, dy = data(np.random.default_rng(2), sq=sq, skv=skv)
    mask = np.triu(np.ones((2048, 2048), bool), 1) if mode in (2, 3, 4) else np.zeros((sq, skv), bool)
    masked, empties = masked_positions(2, 4, sq, skv, mode, pre, nxt, mask)
    assert empties == ((mode, sq) == (3, 7) or nxt == -2)
    got = fa.run(q, k, v, dy, mode=mode, pre=pre, nxt=nxt, mask=mask, precise=precise)
    check(got, reference(q, k, v, dy, masked, 0.25, zero_rows=precise == 2 or empties))


def test_no_mask_is_the_full_matrix(fa):
    """Without an attenMask CANN ignores sparseMode 0's tokens: a causal band asked for is not applied."""
    q, k, v, dy = data(np.random.default_rng(6))
    check(fa.run(q, k, v, dy, pre=BIG, nxt=0), reference(q, k, v, dy, np.zeros((2, 4, 5, 7), bool), 0.25))


@pytest.mark.parametrize("precise", [0, 2])
def test_explicitly_fully_masked_row(fa, precise):
    """A row the mask masks entirely: innerPrecise 0 averages V (every score is -FLT_MAX) and, as CANN's grad
    kernel does not mask dS again, q and k get a gradient from it; innerPrecise 2 gives 0 and no gradient."""
    q, k, v, dy = data(np.random.default_rng(7))
    mask = np.zeros((5, 7), bool)
    mask[1] = True
    mask[3, 2:] = True
    masked, _ = masked_positions(2, 4, 5, 7, 1, BIG, BIG, mask)
    got = fa.run(q, k, v, dy, mode=1, mask=mask, precise=precise)
    want = reference(q, k, v, dy, masked, 0.25, zero_rows=precise == 2)
    check(got, want)
    if precise == 0:
        np.testing.assert_allclose(got[0][0][:, :, 1], np.broadcast_to(v.mean(2), (2, 4, 8)), rtol=1e-5, atol=1e-6)
        assert np.abs(got[1][0][:, :, 1]).max() > 1e-3  # dq of the fully masked row


@pytest.mark.parametrize("shape", [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7), (1, 1, 5, 7)])
@pytest.mark.parametrize("mode", [0, 1])
def test_explicit_masks(fa, shape, mode):
    rng = np.random.default_rng(3)
    q, k, v, dy = data(rng)
    mask = rng.random(shape) > 0.6
    masked, _ = masked_positions(2, 4, 5, 7, mode, 2, 1, mask)
    check(fa.run(q, k, v, dy, mode=mode, pre=2, nxt=1, mask=mask), reference(q, k, v, dy, masked, 0.25))


def test_dropout_by_the_mask_bits(fa):
    """keepProb 0.7 with a dropMask: bit e (byte e/8, bit e%8) of [B, N1, Sq, Skv] keeps P and scales it by
    1/keepProb, in the forward and the backward."""
    rng = np.random.default_rng(4)
    q, k, v, dy = data(rng)
    keep = rng.random((2, 4, 5, 7)) < 0.7
    bits = np.packbits(keep.ravel(), bitorder="little")
    drop = np.zeros(-(-keep.size // 128) * 16, np.uint8)
    drop[: bits.size] = bits
    masked, _ = masked_positions(2, 4, 5, 7, 0, BIG, BIG, None)
    got = fa.run(q, k, v, dy, drop=drop, keep_prob=0.7)
    check(got, reference(q, k, v, dy, masked, 0.25, keep=keep, keep_prob=0.7))


def test_refusals(fa, acl):
    q, k, v, dy = data(np.random.default_rng(5))
    Q, K, V = (fa.t(x) for x in (q, k, v))
    mx, sm, so, out = (
        acl.tensor(shape=(2, 4, 5, 8)),
        acl.tensor(shape=(2, 4, 5, 8)),
        acl.tensor(shape=(0,)),
        acl.tensor(shape=Q.shape),
    )

    def call(
        *, pse=None, mode=0, heads=4, layout=b"BNSD", keep=1.0, mxo=mx, mask=None, drop=None, pre=BIG, nxt=BIG, q=Q
    ):
        return acl.prepare(
            "FlashAttentionScore",
            q,
            K,
            V,
            pse,
            drop,
            None,
            mask,
            [],
            0.25,
            keep,
            pre,
            nxt,
            heads,
            layout,
            0,
            mode,
            mxo,
            sm,
            so,
            out,
        )

    assert call()[0] == 0
    for kw in [
        dict(pse=Q),
        dict(mode=5),
        dict(heads=3),
        dict(layout=b"TND"),
        dict(keep=0.5),
        dict(mxo=acl.tensor(shape=(2, 4, 5, 1))),
        dict(mask=acl.tensor(np.zeros((5, 6), np.uint8), dtype=cs.ACL_BOOL)),
        dict(mask=acl.tensor(np.zeros((5, 7), np.float32))),
        dict(mode=2),  # modes 1-4 need a mask, 2-4 the compressed [2048, 2048] one
        dict(mode=2, mask=acl.tensor(np.zeros((5, 7), np.uint8), dtype=cs.ACL_BOOL)),
        dict(mode=1),
        dict(keep=0.5, drop=acl.tensor(np.zeros(80, np.int32), dtype=cs.ACL_INT32)),  # dropMask must be uint8
        dict(pre=-1, nxt=0, mask=acl.tensor(np.zeros((5, 7), np.uint8), dtype=cs.ACL_UINT8)),  # no key for any query
        dict(q=acl.tensor(q, dtype=cs.ACL_DOUBLE)),
    ]:
        st, _, _, temps = call(**kw)
        acl.release(temps)
        assert st == 161002, kw
