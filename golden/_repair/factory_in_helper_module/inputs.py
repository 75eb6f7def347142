import torch


def position_ids(tokens):
    """Positions 0..T-1 for every row of a batch of token ids."""
    return torch.arange(tokens.size(1)).unsqueeze(0).expand_as(tokens)


def causal_mask(scores):
    """True above the diagonal: a position may not attend to later ones."""
    return torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
