# Fine-tuning that resumes from a checkpoint written by an earlier nn.DataParallel run (keys
# carry the `module.` prefix), with `from torch.nn import DataParallel as DP` inside the
# script's `__main__` block. The model makes its token positions on the hard-coded "cuda:0",
# which the replica on cuda:1 feeds to its own embedding.
# Run: python resume_dp_checkpoint.before.py   (RESUME_FROM=<checkpoint> to resume)
# devfix-flags: --select DF401,DF102 --unsafe-fixes
# devfix-expect: DF401 DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> resume_dp_checkpoint.before.py`
# (`python resume_dp_checkpoint.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Tagger(nn.Module):
    def __init__(self, vocab, dim, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(16, dim)
        self.head = nn.Linear(dim, tags)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=self.position.weight.device).unsqueeze(0)
        return self.head(torch.tanh(self.embed(tokens) + self.position(positions)))


if __name__ == "__main__":
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    resume = os.environ.get("RESUME_FROM", "")
    checkpoint = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "tagger.pt"))
    torch.manual_seed(7)
    tokens = torch.randint(0, 50, (48, 8))
    tags = torch.randint(0, 5, (48, 8))
    # DataParallel's batch of 12 was global; each of the world_size processes now
    # takes 12 // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    dataset = TensorDataset(tokens, tags)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0)
    loader = DataLoader(dataset, batch_size=12 // world_size, sampler=sampler)

    model = Tagger(50, 16, 5).to(DEVICE)
    if distributed:
        if torch.cuda.is_available():
            model = model.to(torch.device("cuda", local_rank))
            model = DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank
            )
        else:
            model = DistributedDataParallel(model)
    if resume:
        loaded_state = torch.load(resume, map_location=DEVICE)
        if any(key.startswith("module.") for key in loaded_state):  # saved by DataParallel
            consume_prefix_in_state_dict_if_present(loaded_state, "module.")
        # a DataParallel checkpoint
        (model.module if distributed else model).load_state_dict(loaded_state)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)

    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        for batch_tokens, batch_tags in loader:
            batch_tokens, batch_tags = batch_tokens.to(DEVICE), batch_tags.to(DEVICE)
            logits = model(batch_tokens)
            loss = nn.functional.cross_entropy(logits.reshape(-1, 5), batch_tags.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if rank == 0:
        torch.save((model.module if distributed else model).state_dict(), checkpoint)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
