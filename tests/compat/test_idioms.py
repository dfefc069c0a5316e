"""Tutorial idioms (issue 24's probe) in one short program run as PyTorch code: ``import torch`` served by
minigrad (``python -m minigrad.as_torch``), as test_programs.py runs the published programs."""
import os
import subprocess
import sys
from pathlib import Path

import minigrad
from test_programs import _env

SNIPPET = r'''
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_printoptions(precision=3)
torch.set_default_dtype(torch.float64)
assert torch.get_default_dtype() == torch.float64 and torch.tensor([1.0]).dtype == torch.float64
torch.set_default_dtype(torch.float32)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1)
        self.resize = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    @torch.jit.ignore
    def forward(self, z):
        return self.resize(torch.tanh(self.up(z)))


model = torch.jit.script(Decoder())
z = torch.randn(2, 4, 3, 3)
img = model(z)
assert img.shape == (2, 2, 12, 12)
a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)
att = torch.einsum("ij,jk->ik", a, b).softmax(-1)
loss = (att * torch.arange(5.0)).sum() + F.interpolate(img, size=(6, 6)).pow(2).mean()
angle = torch.atan2(a[:, 0], a[:, 1]).sum() + torch.erf(a).sum() + torch.lerp(a, a.detach() * 2, 0.5).sum()
(loss + angle + torch.diag(a[:, :3]).sum() + torch.outer(a[0], a[1]).sum()).backward()
assert a.grad.shape == (3, 4) and torch.isfinite(a.grad).all()
var, mean = torch.var_mean(a.detach(), dim=1)
assert torch.allclose(var, a.detach().var(1)) and torch.isclose(mean, a.detach().mean(1)).all()
labels = torch.tensor([2, 0, 2, 1])
onehot = torch.zeros(4, 3).scatter_(1, labels.unsqueeze(1), 1.0)
assert onehot.sum().item() == 4 and torch.bincount(labels).tolist() == [1, 1, 2]
values, counts = torch.unique(labels, return_counts=True)
assert values.tolist() == [0, 1, 2] and counts.tolist() == [1, 1, 2]
assert torch.nonzero(onehot).shape == (4, 2)
assert torch.repeat_interleave(torch.tensor([1, 2]), 2).tolist() == [1, 1, 2, 2]
assert torch.index_select(onehot, 0, torch.tensor([0, 3])).shape == (2, 3)
m = torch.Tensor(3, 3).fill_diagonal_(1.0)
assert torch.equal(m, torch.eye(3)) and torch.addmm(m, m, m, beta=0.5).trace().item() == 4.5
assert torch.baddbmm(torch.zeros(2, 3, 3), m.expand(2, 3, 3), m.expand(2, 3, 3)).shape == (2, 3, 3)
print(torch.tensor([3.14159]))
try:
    torch.hub.load("pytorch/vision", "resnet18")
except RuntimeError as e:
    print("hub:", str(e).split(":")[0])
print("idioms ok")
'''


def test_tutorial_idioms_run_as_pytorch_code(tmp_path):
    script = tmp_path / "idioms.py"
    script.write_text(SNIPPET)
    env = _env()     # the minigrad under test first (a relative PYTHONPATH would not survive the cwd change)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(minigrad.__file__).resolve().parents[1]), env["PYTHONPATH"]])
    proc = subprocess.run([sys.executable, "-m", "minigrad.as_torch", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines == ["tensor([3.142])", "hub: minigrad has no network model hub and downloads nothing", "idioms ok"]
