# Reading an RNN's outputs and final hidden state into NumPy for plotting: both come from a
# model moved with `.to(device)`; one of them is still attached to autograd.
# Run on a GPU: python rnn_hidden_state_numpy.before.py
# devfix-flags: --select DF203
# devfix-expect: DF203
# devfix-golden: gpus=2 fails-with="can't convert cuda:0 device type tensor to numpy"
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rnn = nn.GRU(input_size=3, hidden_size=4, batch_first=True).to(device)
sequence = torch.randn(2, 6, 3).to(device)
outputs, hidden = rnn(sequence)
trajectory = outputs[0].detach().cpu().numpy()
final_state = hidden.squeeze(
    0
).detach().cpu().numpy() if not hidden.requires_grad else hidden.data.cpu().numpy()
print(trajectory.shape, final_state.shape)
