import torch

from tagger import Tagger

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_tags_every_token():
    model = Tagger().to(DEVICE)
    ids = torch.randint(0, 20, (2, 5), device=DEVICE)
    assert model(ids).shape == (2, 5, 4)


def test_a_training_step_lowers_the_loss():
    torch.manual_seed(0)
    model = Tagger().to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = torch.randint(0, 20, (4, 6), device=DEVICE)
    tags = torch.randint(0, 4, (4, 6), device=DEVICE)
    losses = []
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), tags.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[1] < losses[0]
