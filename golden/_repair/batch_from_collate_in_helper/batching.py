import torch


def collate(rows):
    features = torch.stack([torch.as_tensor(r[0], dtype=torch.float32) for r in rows])
    return features
