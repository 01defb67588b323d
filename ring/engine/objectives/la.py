"""Local Aggregation (LA, Zhuang et al. 2019): background neighbours, close neighbours, their loss.

For query ``q_i`` and memory bank ``M``:

* background neighbours ``B_i``: the ``k`` bank entries closest to ``q_i`` (LA's 4096).  Two rules
  for the instance's own entry (``la_own_entry``): ``"topk"`` (LA's code, neuroailab/LocalAggregation-
  Pytorch ``src/objectives/localagg.py``, the default of the ``LA`` row) takes the k closest of the
  whole bank, the own entry a (close) neighbour only if it lands among them; ``"positive"`` (ours, the
  ``LAOwnPositive`` row) leaves it out of the k and always adds it as the positive, counted once;
* close neighbours ``C_i``: the entries of ``B_i`` sharing a k-means cluster with ``i`` in any of
  the clusterings (LA's ``C_i`` within ``B_i``, as in LA's code).

The loss is the appendix's Eq. (LA) in LA's own form, the negative log of the probability mass of
the positives within the background: ``-log sum_{P} e^{q.M[j]/tau} / sum_{P u B_i} e^{q.M[j]/tau}``
with ``P = {i} u C_i``.  The +C_i variants keep the numerator and put Ring's k negatives in the
denominator ("negative samples are drawn as in regular Ring"), so LA and IRing (+C_i) differ only
by which entries are negatives.  The numerator and denominator are sums, not the paper's means:
LA's code sums, and with means a cluster of one would outweigh a cluster of fifty.  The ``"topk"``
rule takes LA's code's form to the letter, ``-log(mass + 1e-7)``: with no close neighbour in
``B_i`` (own entry not among the k) the mass is 0 and the loss a constant with no gradient.
"""

from __future__ import annotations

import torch

# LA's code: loss = -log(relative_prob + 1e-7), which keeps a query without close neighbours finite.
LA_EPSILON = 1e-7


@torch.no_grad()
def background_neighbours(
    q: torch.Tensor,
    memory: torch.Tensor,
    index: torch.Tensor,
    k: int,
    max_chunk_elements: int,
    include_own: bool = False,
) -> torch.Tensor:
    """B x k indices of the bank entries closest to each query, its own entry ``index`` excluded
    unless ``include_own`` (LA's code: the k closest of the whole bank)."""
    n = memory.shape[0]
    if k >= n:
        raise ValueError(
            f"LA needs fewer background neighbours (bank_negatives={k}) than bank entries ({n}); lower it."
        )
    out = torch.empty((len(q), k), dtype=torch.long, device=q.device)
    step = max(1, min(len(q), max_chunk_elements // max(n, 1)))
    for start in range(0, len(q), step):
        sims = q[start : start + step] @ memory.T
        if not include_own:
            sims.scatter_(1, index[start : start + step, None], float("-inf"))
        out[start : start + step] = torch.topk(sims, k, dim=1, sorted=False).indices
    return out


def local_aggregation_loss(
    l_pos: torch.Tensor,
    l_close: torch.Tensor,
    close: torch.Tensor,
    l_neg: torch.Tensor,
    neg_keep: torch.Tensor | None,
    temperature: float,
) -> torch.Tensor:
    """Mean over queries of ``-log(sum_P e^{l/tau} / sum_{P u N} e^{l/tau})``.

    ``l_pos`` (B x 1) is the instance's own similarity; ``l_close`` (B x C) candidate close
    neighbours, of which ``close`` (B x C boolean) are positives; ``l_neg`` (B x K) negatives, of
    which ``neg_keep`` are used (all when None).  With no close neighbour and every negative kept
    this is IR's loss exactly.
    """
    minus_inf = torch.tensor(float("-inf"), dtype=l_close.dtype, device=l_close.device)
    positives = torch.cat([l_pos, torch.where(close, l_close, minus_inf)], dim=1) / temperature
    negatives = l_neg if neg_keep is None else torch.where(neg_keep, l_neg, minus_inf)
    everything = torch.cat([positives, negatives / temperature], dim=1)
    return (torch.logsumexp(everything, dim=1) - torch.logsumexp(positives, dim=1)).mean()


def local_aggregation_loss_topk(
    l_background: torch.Tensor, close: torch.Tensor, temperature: float, epsilon: float = LA_EPSILON
) -> torch.Tensor:
    """LA's code's loss: mean over queries of ``-log(sum_{C_i} p + epsilon)`` with ``p`` the softmax of
    ``l_background / temperature`` (B x k) over the background ``B_i`` and ``close`` (B x k boolean)
    the entries of ``B_i`` sharing a cluster with the instance (its own entry, when there, included)."""
    mass = (torch.softmax(l_background / temperature, dim=1) * close).sum(dim=1)
    return -torch.log(mass + epsilon).mean()
