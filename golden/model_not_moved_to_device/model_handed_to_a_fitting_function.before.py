# A library's `fit` is handed the network its caller built, picks the GPU itself and sends
# every batch there, but never the network: on a GPU the LSTM meets CUDA inputs with
# CPU weights. The network gets the same move once the device is chosen.
# Run on a GPU: python model_handed_to_a_fitting_function.before.py
# devfix-flags: --select DF207
# devfix-expect: DF207
# devfix-golden: gpus=1 fails-with="Input and parameter tensors are not at the same device" devices="cuda:0,cpu"
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Forecaster(nn.Module):
    def __init__(self, features: int = 3, hidden: int = 8) -> None:
        super().__init__()
        self.rnn = nn.LSTM(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def fit(X, y, network, criterion, optimizer, epochs=2, batch_size=4):
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda:0" if use_cuda else "cpu")
    loader = DataLoader(TensorDataset(X, y), batch_size=batch_size)
    network.train()
    for epoch in range(epochs):
        for batch_x, batch_y in loader:
            batch_x, batch_y = batch_x.to(device), batch_y.to(device)
            prediction = network(batch_x)
            loss = criterion(prediction.view(-1), batch_y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print("epoch", epoch, "loss", round(loss.item(), 4))
    return {"network": network, "loss": loss.item()}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Forecaster()
    fit(
        torch.randn(16, 5, 3),
        torch.randn(16),
        model,
        nn.L1Loss(),
        torch.optim.Adam(model.parameters(), lr=1e-2),
    )
