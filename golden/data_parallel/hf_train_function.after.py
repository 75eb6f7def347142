# A training script in the style of the older Hugging Face examples: `main()` parses the
# arguments, counts the GPUs into `args.n_gpu` and calls `train(args, dataset)`, which wraps
# the model in nn.DataParallel behind `if args.n_gpu > 1:`, keeps the examples'
# `if args.n_gpu > 1: loss = loss.mean()`, logs through a module logger and saves
# `model.module` when there is one. The model's position ids are made on `args.device`
# ("cuda:0"), which the replica on cuda:1 meets.
# Run: python hf_train_function.before.py
# devfix-flags: --select DF401,DF102 --unsafe-fixes
# devfix-expect: DF401 DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> hf_train_function.before.py`
# (`python hf_train_function.before.py` runs one process)
import argparse
import logging
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger(__name__)


class TinyTagger(nn.Module):
    def __init__(self, vocab, dim, device):
        super().__init__()
        self.device = device
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(8, dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=self.position.weight.device).unsqueeze(
            0
        )
        return self.head(torch.tanh(self.embed(input_ids) + self.position(positions)))


def train(args, dataset):
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    # DataParallel's batch of args.train_batch_size was global; each of the world_size processes now
    # takes args.train_batch_size // world_size of it (when that does not divide, the global batch
    # is smaller). Each process reads its own shard of the data set.
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0)
    loader = DataLoader(dataset, batch_size=args.train_batch_size // world_size, sampler=sampler)
    model = TinyTagger(30, 16, args.device).to(args.device)
    if distributed:
        if torch.cuda.is_available():
            model = model.to(torch.device("cuda", local_rank))
            model = DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank
            )
        else:
            model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.num_train_epochs):
        sampler.set_epoch(epoch)
        for input_ids, labels in loader:
            logits = model(input_ids.to(args.device))
            loss = criterion(logits.reshape(-1, 2), labels.to(args.device).reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        if rank == 0:
            logger.info("epoch %d loss %.4f", epoch, loss.item())
    model_to_save = model.module if hasattr(model, "module") else model
    if rank == 0:
        torch.save(model_to_save.state_dict(), args.output_file)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=0.1)
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument(
        "--output_file",
        default=os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "tagger.bin")),
    )
    args = parser.parse_args()
    args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.n_gpu = torch.cuda.device_count()
    logging.basicConfig(level=logging.INFO)
    if os.environ.get("RANK", "0") == "0":
        logger.info("device: %s, n_gpu: %d", args.device, args.n_gpu)
    torch.manual_seed(42)
    dataset = TensorDataset(torch.randint(0, 30, (32, 6)), torch.randint(0, 2, (32, 6)))
    train(args, dataset)


if __name__ == "__main__":
    main()
