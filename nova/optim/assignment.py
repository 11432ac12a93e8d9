"""The linear assignment problem (optax.assignment): two O(n^2 m) Hungarian methods written with
nova.lax.fori_loop / while_loop, so they run eagerly and under nova.jit.

Both solve min over assignments of sum C[i, j(i)] for an n x m cost matrix, assigning
min(n, m) pairs; a tall matrix is solved transposed. They find the same optimum (for a cost
matrix with several optimal assignments they may pick different ones) and order the pairs as
optax's functions do.
"""

from __future__ import annotations

import numpy as np

import nova.numpy as jnp
from nova import lax


def _oriented(fn: str, cost_matrix):
    """The float32 cost matrix with at most as many rows as columns, and whether it was
    transposed; ValueError / TypeError for a matrix that is not 2-D real."""
    c = jnp.asarray(cost_matrix)
    if c.ndim != 2:
        raise ValueError(f"{fn}: cost_matrix must be 2-D (n, m), got shape {tuple(c.shape)}")
    if np.dtype(c.dtype).kind not in "iuf":
        raise TypeError(f"{fn}: cost_matrix must have a real dtype, got {c.dtype}")
    transpose = c.shape[0] > c.shape[1]
    return (c.T if transpose else c).astype(jnp.float32), transpose


def _empty():
    return jnp.zeros(0, jnp.int32), jnp.zeros(0, jnp.int32)


# --- the potentials method (Kuhn-Munkres with Dijkstra-like column scans) ------------------------


def _add_row(cost, row, carry):
    """Adds row `row` to the matching. Columns are 1-based, column 0 a virtual start; u and v
    are the row and column potentials, owner[j] the 1-based row holding column j (0: free)."""
    n, m = cost.shape
    u, v, owner = carry
    owner = owner.at[0].set(row + 1)

    def scan_column(state):
        u, v, used, minv, way, j0 = state
        used = used.at[j0].set(True)
        i0 = owner[j0]
        free = ~used[1:]
        reduced = jnp.where(free, cost[i0 - 1] - u[i0] - v[1:], jnp.inf)
        better = reduced < minv
        way = jnp.where(better, j0, way)
        minv = jnp.where(better, reduced, minv)
        masked = jnp.where(free, minv, jnp.inf)
        j1 = jnp.argmin(masked).astype(jnp.int32) + 1
        delta = jnp.min(masked)
        # rows of used columns gain delta (slot n + 1 absorbs the unused columns' writes)
        u = u.at[jnp.where(used, owner, n + 1)].add(delta)
        v = jnp.where(used, v - delta, v)
        minv = jnp.where(free, minv - delta, minv)
        return u, v, used, minv, way, j1

    start = (u, v, jnp.zeros(m + 1, bool), jnp.full(m, jnp.inf, jnp.float32),
             jnp.zeros(m, jnp.int32), jnp.asarray(0, jnp.int32))
    u, v, _, _, way, j0 = lax.while_loop(lambda s: owner[s[-1]] != 0, scan_column, start)

    def flip(state):
        owner, j = state
        prev = way[j - 1]
        return owner.at[j].set(owner[prev]), prev

    owner, _ = lax.while_loop(lambda s: s[1] != 0, flip, (owner, j0))
    return u, v, owner


def hungarian_algorithm(cost_matrix):
    """A minimum-cost assignment of rows to columns (optax.assignment.hungarian_algorithm): the
    Hungarian method with row and column potentials, adding one row at a time by a shortest
    augmenting path (Kuhn 1955; the O(n^2 m) form of Jonker & Volgenant 1987, as in the Scenic
    library, Dehghani et al. 2022).

    Args:
      cost_matrix: an (n, m) real array (cast to float32).

    Returns:
      (i, j): int32 arrays of min(n, m) row and column indices; the cost is
      cost_matrix[i, j].sum(). For a square matrix j is arange(n); otherwise the pairs are
      ordered by decreasing index along the shorter side, as optax's.

    Raises:
      ValueError: cost_matrix is not 2-D; TypeError: it is not real.
    """
    cost, transpose = _oriented("hungarian_algorithm", cost_matrix)
    n, m = cost.shape
    if n == 0 or m == 0:
        return _empty()
    init = (jnp.zeros(n + 2, jnp.float32), jnp.zeros(m + 1, jnp.float32),
            jnp.zeros(m + 1, jnp.int32))
    _, _, owner = lax.fori_loop(0, n, lambda r, c: _add_row(cost, r, c), init)
    if n == m:  # every column is held: pairs in column order
        return owner[1:] - 1, jnp.arange(m, dtype=jnp.int32)
    # column of each row: free columns (owner 0) write to slot 0, which is dropped
    col_of = jnp.zeros(n + 1, jnp.int32).at[owner[1:]].set(jnp.arange(m, dtype=jnp.int32))
    short, long = jnp.arange(n, dtype=jnp.int32)[::-1], col_of[1:][::-1]
    return (long, short) if transpose else (short, long)


# --- Crouse's shortest augmenting path -----------------------------------------------------------


def _augment_row(cost, row, carry):
    """Crouse's step for one row: Dijkstra over the columns with reduced costs, from `row` to
    the nearest free column, then the potentials update and the flip along the path."""
    n, m = cost.shape
    u, v, row4col, col4row = carry

    def visit(state):
        i, low, sr, sc, dist, path, sink, _ = state
        sr = sr.at[i].set(True)
        reduced = low + cost[i] - u[i] - v
        better = ~sc & (reduced < dist)
        path = jnp.where(better, i, path)
        dist = jnp.where(better, reduced, dist)
        cand = jnp.where(sc, jnp.inf, dist)
        low = jnp.min(cand)
        # among the nearest columns prefer a free one, so the search ends sooner
        nearest = cand == low
        j = jnp.argmax(nearest & (row4col == -1)).astype(jnp.int32)
        j = jnp.where(jnp.any(nearest & (row4col == -1)), j,
                      jnp.argmax(nearest).astype(jnp.int32))
        sc = sc.at[j].set(True)
        free = row4col[j] == -1
        stuck = low == jnp.inf  # no finite path: stop rather than loop
        sink = jnp.where(free, j, sink)
        return jnp.where(free, i, row4col[j]), low, sr, sc, dist, path, sink, stuck

    start = (jnp.asarray(row, jnp.int32), jnp.asarray(0.0, jnp.float32), jnp.zeros(n, bool),
             jnp.zeros(m, bool), jnp.full(m, jnp.inf, jnp.float32), jnp.full(m, -1, jnp.int32),
             jnp.asarray(-1, jnp.int32), jnp.asarray(False))
    _, low, sr, sc, dist, path, sink, _ = lax.while_loop(
        lambda s: (s[6] == -1) & ~s[7], visit, start)
    others = sr & (jnp.arange(n) != row)
    u = jnp.where(others, u + low - dist[jnp.maximum(col4row, 0)], u).at[row].add(low)
    v = jnp.where(sc, v + dist - low, v)

    def flip(state):
        j, row4col, col4row, _ = state
        i = path[j]
        row4col = row4col.at[j].set(i)
        return col4row[i], row4col, col4row.at[i].set(j), i == row

    _, row4col, col4row, _ = lax.while_loop(lambda s: ~s[3] & (sink >= 0), flip,
                                            (sink, row4col, col4row, jnp.asarray(False)))
    return u, v, row4col, col4row


def base_hungarian_algorithm(cost_matrix):
    """A minimum-cost assignment of rows to columns (optax.assignment.base_hungarian_algorithm):
    the shortest-augmenting-path Hungarian method of Crouse 2016, "On implementing 2D
    rectangular assignment algorithms" (IEEE TAES 52(4), pp. 1685-1686), one row at a time.

    Args:
      cost_matrix: an (n, m) real array (cast to float32).

    Returns:
      (i, j): int32 arrays of min(n, m) row and column indices, i increasing; the cost is
      cost_matrix[i, j].sum().

    Raises:
      ValueError: cost_matrix is not 2-D; TypeError: it is not real.
    """
    cost, transpose = _oriented("base_hungarian_algorithm", cost_matrix)
    n, m = cost.shape
    if n == 0 or m == 0:
        return _empty()
    init = (jnp.zeros(n, jnp.float32), jnp.zeros(m, jnp.float32), jnp.full(m, -1, jnp.int32),
            jnp.full(n, -1, jnp.int32))
    _, _, _, col4row = lax.fori_loop(0, n, lambda r, c: _augment_row(cost, r, c), init)
    if transpose:
        order = jnp.argsort(col4row).astype(jnp.int32)
        return col4row[order], order
    return jnp.arange(n, dtype=jnp.int32), col4row


__all__ = ["base_hungarian_algorithm", "hungarian_algorithm"]
