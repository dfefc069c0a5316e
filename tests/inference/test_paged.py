"""The block allocator, the block manager and paged attention."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import inference as infer
from minigrad.backend import get_backend
from minigrad.errors import ArgumentError, ShapeError


def test_allocator_allocate_free_share_cow():
    a = infer.BlockAllocator(3)
    b0, b1 = a.allocate(), a.allocate()
    assert (b0, b1) == (0, 1) and a.num_free_blocks == 1
    assert a.share(b0) == b0 and a.ref_count(b0) == 2
    assert a.copy_on_write(b1) == (b1, False)            # sole owner writes in place
    new, copied = a.copy_on_write(b0)                     # shared: the writer moves to a fresh block
    assert copied and new == 2 and a.ref_count(b0) == 1 and a.ref_count(new) == 1
    with pytest.raises(infer.NoFreeBlocksError):
        a.allocate()
    assert a.free(b1) is True and a.free_block_ids == [1]
    with pytest.raises(ArgumentError, match="freed twice"):
        a.free(b1)
    with pytest.raises(ArgumentError, match="no block"):
        a.share(7)


def test_manager_prefix_sharing_and_copy_on_write():
    m = infer.BlockManager(infer.BlockAllocator(8), block_size=4)
    prompt = list(range(10))                               # blocks: 4 + 4 + 2 tokens
    assert m.allocate("a", prompt) == 0
    assert m.allocate("b", prompt) == 10                   # identical prompt: everything cached, shared
    assert m.block_tables["a"] == m.block_tables["b"] == [0, 1, 2]
    assert m.allocate("c", prompt[:8] + [99]) == 8         # shares the two full blocks only
    assert m.block_tables["c"][:2] == [0, 1] and m.allocator.ref_count(0) == 3
    m.check()
    assert m.append_slot("a", 10) == (2, 4)                # a writes into the shared partial block: COW
    assert m.block_tables["a"] == [0, 1, 4] and m.cow_copies == 1
    assert m.append_slot("b", 10) is None                  # b is now block 2's only owner
    assert m.append_slot("b", 11) is None and m.append_slot("b", 12) is None   # ... then a new block
    assert len(m.block_tables["b"]) == 4
    m.check()
    assert m.allocate("d", prompt) == 8                    # block 2 was written: no longer a prefix hit
    for s in "abcd":
        m.free(s)
    m.check()
    assert m.allocator.num_free_blocks == 8 and m.tokens_stored() == 0
    with pytest.raises(ArgumentError, match="already has blocks"):
        m.allocate("x", [1]) or m.allocate("x", [1])


def _reference(q, ks, vs):
    """Attention of row b's L queries over its own S_b keys, causal at the end (plain NumPy)."""
    out = []
    for qb, kb, vb in zip(q, ks, vs):
        L, S = qb.shape[1], kb.shape[1]
        s = qb @ kb.swapaxes(-1, -2) / np.sqrt(qb.shape[-1])
        s = np.where(np.arange(S)[None, :] <= (S - L + np.arange(L))[:, None], s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out.append((p / p.sum(-1, keepdims=True)) @ vb)
    return np.stack(out)


@pytest.mark.parametrize("L,tile", [(1, 1), (1, 16), (3, 2)])
def test_paged_attention_equals_contiguous(device, L, tile):
    rng = np.random.default_rng(0)
    H, D, bs, nb = 2, 4, 4, 16
    kc, vc = rng.standard_normal((2, nb, H, bs, D))
    lens = [5, 13, 3]
    tables = [[7, 2], [0, 9, 4, 11], [5]]                  # scattered blocks
    width = max(map(len, tables))
    bt = np.array([t + [0] * (width - len(t)) for t in tables])
    gather = lambda c, t, n: np.concatenate([c[b] for b in t], axis=1)[:, :n]   # (H, n, D)
    ks = [gather(kc, t, n) for t, n in zip(tables, lens)]
    vs = [gather(vc, t, n) for t, n in zip(tables, lens)]
    q = rng.standard_normal((3, H, L, D))
    be = mg.tensor(q, device=device)
    xp = get_backend(device).xp
    out = infer.paged_attention(be, xp.asarray(kc), xp.asarray(vc), bt, lens, tile_blocks=tile)
    np.testing.assert_allclose(out.numpy(), _reference(q, ks, vs), rtol=1e-12, atol=1e-12)


def test_paged_attention_errors():
    q = mg.randn(1, 2, 1, 4)
    kc = np.zeros((4, 2, 4, 4), np.float32)
    with pytest.raises(ShapeError, match="context_lens"):
        infer.paged_attention(q, kc, kc, np.zeros((1, 1), int), [9])
    with pytest.raises(ShapeError, match="num_blocks"):
        infer.paged_attention(q, kc[:, :1], kc[:, :1], np.zeros((1, 1), int), [1])
    with pytest.raises(RuntimeError, match="inference only"):
        qq = mg.randn(1, 2, 1, 4, requires_grad=True)
        infer.paged_attention(qq, kc, kc, np.zeros((1, 1), int), [1]).sum().backward()
