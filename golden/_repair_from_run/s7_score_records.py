# Scoring JSON records with a model on the GPU: score() stacks each record's features on the
# CPU and hands them to the model, whose forward is where the error is raised.
import json

import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.encoder = nn.Linear(width, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, features):
        return self.head(torch.relu(self.encoder(features))).squeeze(-1)


def score(model, records):
    features = torch.stack([torch.tensor(r["features"]) for r in records])
    return model(features).sigmoid().tolist()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Scorer(4).to(device).eval()
    lines = ['{"features": [0.1, 0.2, 0.3, 0.4]}', '{"features": [0.5, 0.1, 0.0, 0.9]}']
    with torch.no_grad():
        print([round(p, 3) for p in score(model, [json.loads(line) for line in lines])])


if __name__ == "__main__":
    main()
