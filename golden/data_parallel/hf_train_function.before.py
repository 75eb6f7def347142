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
import argparse
import logging
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


class TinyTagger(nn.Module):
    def __init__(self, vocab, dim, device):
        super().__init__()
        self.device = device
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(8, dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=self.device).unsqueeze(0)
        return self.head(torch.tanh(self.embed(input_ids) + self.position(positions)))


def train(args, dataset):
    loader = DataLoader(dataset, batch_size=args.train_batch_size, shuffle=False)
    model = TinyTagger(30, 16, args.device).to(args.device)
    if args.n_gpu > 1:
        model = torch.nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.num_train_epochs):
        for input_ids, labels in loader:
            logits = model(input_ids.to(args.device))
            loss = criterion(logits.reshape(-1, 2), labels.to(args.device).reshape(-1))
            if args.n_gpu > 1:
                loss = loss.mean()  # mean() to average on multi-gpu parallel training
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        logger.info("epoch %d loss %.4f", epoch, loss.item())
    model_to_save = model.module if hasattr(model, "module") else model
    torch.save(model_to_save.state_dict(), args.output_file)


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
    args.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    args.n_gpu = torch.cuda.device_count()
    logging.basicConfig(level=logging.INFO)
    logger.info("device: %s, n_gpu: %d", args.device, args.n_gpu)
    torch.manual_seed(42)
    dataset = TensorDataset(torch.randint(0, 30, (32, 6)), torch.randint(0, 2, (32, 6)))
    train(args, dataset)


if __name__ == "__main__":
    main()
