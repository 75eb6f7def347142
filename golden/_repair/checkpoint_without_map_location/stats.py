import torch


def write_stats(path):
    """An earlier run's normalisation statistics, computed and saved on its second GPU."""
    where = "cuda:1" if torch.cuda.device_count() > 1 else "cpu"
    features = torch.randn(64, 4, device=where)
    torch.save({"mean": features.mean(0), "std": features.std(0)}, path)
