# Seed 001: a seq2seq Transformer (bentrevett tutorial 6 style) trained with nn.DataParallel.
# On two GPUs the attention's `self.scale`, made on cuda:0 in __init__, meets the replica's
# activations on cuda:1. The answer's recommendation: one process per GPU with DDP + torchrun.
# (SGD instead of the tutorial's Adam: Adam turns the float noise of the attention keys' bias,
# whose true gradient is zero, into full-size steps, so no two runs could be compared.)
# Run: python seed001_transformer.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs>
# seed001_transformer.before.py` (`python seed001_transformer.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CHECKPOINT = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "tut6-model.pt"))

INPUT_DIM = OUTPUT_DIM = 13
HID_DIM, N_HEADS, PF_DIM, MAX_LEN = 16, 2, 32, 12
BATCH_SIZE = 16
N_EPOCHS = 2
CLIP = 1.0


class MultiHeadAttention(nn.Module):
    def __init__(self, hid_dim, n_heads, device):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = hid_dim // n_heads
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        self.register_buffer(
            "scale", torch.sqrt(torch.FloatTensor([self.head_dim]).to(device)), persistent=False
        )

    def forward(self, query, key, value):
        batch_size = query.shape[0]
        Q = self.fc_q(query).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = self.fc_k(key).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = self.fc_v(value).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        attention = torch.softmax(energy, dim=-1)
        x = torch.matmul(attention, V).permute(0, 2, 1, 3).contiguous()
        return self.fc_o(x.view(batch_size, -1, self.n_heads * self.head_dim))


class Encoder(nn.Module):
    def __init__(self, input_dim, hid_dim, n_heads, device):
        super().__init__()
        self.tok_embedding = nn.Embedding(input_dim, hid_dim)
        self.pos_embedding = nn.Embedding(MAX_LEN, hid_dim)
        self.attention = MultiHeadAttention(hid_dim, n_heads, device)
        self.ff = nn.Sequential(nn.Linear(hid_dim, PF_DIM), nn.ReLU(), nn.Linear(PF_DIM, hid_dim))

    def forward(self, src):
        pos = torch.arange(0, src.shape[1], device=src.device).unsqueeze(0).repeat(src.shape[0], 1)
        src = self.tok_embedding(src) + self.pos_embedding(pos)
        src = src + self.attention(src, src, src)
        return src + self.ff(src)


class Decoder(nn.Module):
    def __init__(self, output_dim, hid_dim, n_heads, device):
        super().__init__()
        self.tok_embedding = nn.Embedding(output_dim, hid_dim)
        self.pos_embedding = nn.Embedding(MAX_LEN, hid_dim)
        self.self_attention = MultiHeadAttention(hid_dim, n_heads, device)
        self.cross_attention = MultiHeadAttention(hid_dim, n_heads, device)
        self.fc_out = nn.Linear(hid_dim, output_dim)

    def forward(self, trg, enc_src):
        pos = torch.arange(0, trg.shape[1], device=trg.device).unsqueeze(0).repeat(trg.shape[0], 1)
        trg = self.tok_embedding(trg) + self.pos_embedding(pos)
        trg = trg + self.self_attention(trg, trg, trg)
        trg = trg + self.cross_attention(trg, enc_src, enc_src)
        return self.fc_out(trg)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, trg):
        return self.decoder(trg, self.encoder(src))


def train(model, iterator, optimizer, criterion, clip):
    model.train()
    epoch_loss = 0
    for src, trg in iterator:
        src, trg = src.to(device), trg.to(device)
        optimizer.zero_grad()
        output = model(src, trg[:, :-1])
        loss = criterion(output.reshape(-1, OUTPUT_DIM), trg[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        epoch_loss += loss.item()
    return epoch_loss / len(iterator)


def evaluate(model, iterator, criterion):
    model.eval()
    epoch_loss = 0
    with torch.no_grad():
        for src, trg in iterator:
            src, trg = src.to(device), trg.to(device)
            output = model(src, trg[:, :-1])
            loss = criterion(output.reshape(-1, OUTPUT_DIM), trg[:, 1:].reshape(-1))
            epoch_loss += loss.item()
    return epoch_loss / len(iterator)


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

    torch.manual_seed(1234)
    train_data = TensorDataset(
        torch.randint(1, INPUT_DIM, (64, 10)), torch.randint(1, OUTPUT_DIM, (64, 9))
    )
    valid_data = TensorDataset(
        torch.randint(1, INPUT_DIM, (32, 10)), torch.randint(1, OUTPUT_DIM, (32, 9))
    )
    # DataParallel's batch of BATCH_SIZE was global; each of the world_size processes now
    # takes BATCH_SIZE // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    train_sampler = DistributedSampler(
        train_data, num_replicas=world_size, rank=rank, shuffle=False, seed=0
    )
    train_iterator = DataLoader(
        train_data, batch_size=BATCH_SIZE // world_size, sampler=train_sampler
    )
    valid_iterator = DataLoader(valid_data, batch_size=BATCH_SIZE)

    enc = Encoder(INPUT_DIM, HID_DIM, N_HEADS, device)
    dec = Decoder(OUTPUT_DIM, HID_DIM, N_HEADS, device)
    model = Seq2Seq(enc, dec).to(device)
    if distributed:
        if torch.cuda.is_available():
            model = model.to(torch.device("cuda", local_rank))
            model = DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank
            )
        else:
            model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    best_valid_loss = float("inf")
    for epoch in range(N_EPOCHS):
        train_sampler.set_epoch(epoch)
        train_loss = train(model, train_iterator, optimizer, criterion, CLIP)
        valid_loss = evaluate(model, valid_iterator, criterion)
        if valid_loss < best_valid_loss:
            best_valid_loss = valid_loss
            if rank == 0:
                torch.save((model.module if distributed else model).state_dict(), CHECKPOINT)
        if rank == 0:
            print(f"Epoch: {epoch + 1:02} | Train Loss: {train_loss:.3f} | Val. Loss: {valid_loss:.3f}")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
