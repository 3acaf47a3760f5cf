"""PyTorch side of bench_trainer: the train_mnist and train_basicnet workloads
as a plain PyTorch loop over preloaded tensors (no DataLoader, no Trainer).

    /usr/bin/python3 bench/bench_trainer_torch.py --workload mlp --epochs 1
    /usr/bin/python3 bench/bench_trainer_torch.py --workload basicnet --epochs 1
    /usr/bin/python3 bench/bench_trainer_torch.py --workload resnet18 --epochs 3
    /usr/bin/python3 bench/bench_trainer_torch.py --workload mlp --epochs 8 --eval
    python3 bench/bench_trainer_torch.py --workload resnet50 --batch 128 --epochs 2 \
        --mixed-precision bf16 --cuda

Workloads (the same recipes as examples/train_mnist.c and train_basicnet.c,
and bench_trainer.c's resnet18):
  mlp       Flatten + Linear 784-128-64-10 with ReLUs, CrossEntropyLoss, SGD
            lr 0.001 momentum 0.9, batch 32; inputs ToTensor-scaled (v/255)
  basicnet  PyTorch's MNIST example net (log_softmax output), NLLLoss, AdamW
            lr 1e-3 (betas 0.9/0.999, eps 1e-8, weight_decay 0.01), batch 64;
            inputs (v/255 - 0.2860) / 0.3530 (Fashion-MNIST's mean/std)
  resnet18  torchvision's ResNet-18 (written out below: torchvision is not a
            Debian package for this Python) with 10 classes, random 64x64 RGB
            images in [0, 1) and random labels, CrossEntropyLoss, SGD lr 0.01
            momentum 0.9, batch 32, 10 batches per epoch
  resnet50  torchvision's resnet50(num_classes=10) on random 224x224 images,
            otherwise as resnet18, batch 128 (needs torchvision); with
            --mixed-precision bf16|fp16 the forward and loss run under
            torch.autocast (fp16 with a GradScaler). On CUDA, cuDNN's
            benchmark mode is on: PyTorch at its best for fixed shapes.
            --channels-last converts the model and every batch to
            torch.channels_last (PyTorch's NHWC convolutions and batch norms).
Each epoch is one shuffled pass over the 60 000 training images (or
--batches batches); the timing covers the training loop only (shuffle,
slicing, forward, backward, step). --batch overrides the batch size.
Prints one line per epoch, "epoch_s <seconds> step_ms <ms> last_loss <loss>",
then, with --eval, the test accuracy, and finally "peak_rss_mib <MiB>"
(getrusage ru_maxrss). The resnets also print "images_per_s <n>" per epoch.

Images are read with gzip + numpy and kept as u8; each batch is converted to
f32 when it is sliced (like the C side, which keeps u8 images and converts
per batch). Threads: torch.set_num_threads(--threads), 2 by default.
"""
import argparse
import gzip
import os
import resource
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    """An unsigned-byte IDX file (gzip'd or plain) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims).copy()


def load(root, split):
    def find(name):
        gz = os.path.join(root, name + ".gz")
        return gz if os.path.exists(gz) else os.path.join(root, name)

    x = torch.from_numpy(read_idx(find(f"{split}-images-idx3-ubyte")))
    y = torch.from_numpy(read_idx(find(f"{split}-labels-idx1-ubyte")).astype(np.int64))
    return x.unsqueeze(1), y  # (N, 1, 28, 28) u8, (N) i64


class BasicNet(nn.Module):
    """pytorch/examples mnist/main.py's Net."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + idt)


class ResNet18(nn.Module):
    """torchvision's resnet18(num_classes) layer for layer."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        chans, cin, layers = [64, 128, 256, 512], 64, []
        for i, c in enumerate(chans):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c, 1)))
            cin = c
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = F.adaptive_avg_pool2d(self.layers(x), 1)
        return self.fc(torch.flatten(x, 1))


def workload(name):
    """model, loss, optimizer, batch size, input transform of a batch."""
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(num_classes=10)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return model, nn.CrossEntropyLoss(), opt, 128, lambda x: x
    if name == "mlp":
        model = nn.Sequential(
            nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
        return model, nn.CrossEntropyLoss(), opt, 32, lambda u8: u8.float().div_(255)
    if name == "resnet18":
        model = ResNet18(10)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return model, nn.CrossEntropyLoss(), opt, 32, lambda x: x
    model = BasicNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    return model, nn.NLLLoss(), opt, 64, lambda u8: u8.float().div_(255).sub_(MEAN).div_(STD)


def train_epoch(model, loss_fn, opt, bs, prep, x, y, g, batches, amp):
    """Trains one epoch; returns the last loss and the number of steps.
    amp: None, or (autocast dtype, GradScaler or None)."""
    model.train()
    perm = torch.randperm(len(x), generator=g).to(x.device)
    starts = range(0, len(x), bs)
    if batches:
        starts = starts[:batches]
    for i in starts:
        idx = perm[i : i + bs]
        if amp is None:
            loss = loss_fn(model(prep(x[idx])), y[idx])
        else:
            with torch.autocast(x.device.type, dtype=amp[0]):
                loss = loss_fn(model(prep(x[idx])), y[idx])
        opt.zero_grad()
        if amp is not None and amp[1] is not None:
            amp[1].scale(loss).backward()
            amp[1].step(opt)
            amp[1].update()
        else:
            loss.backward()
            opt.step()
    return loss.item(), len(starts)


@torch.no_grad()
def accuracy(model, prep, x, y):
    model.eval()
    correct = 0
    for i in range(0, len(x), 1000):
        correct += (model(prep(x[i : i + 1000])).argmax(1) == y[i : i + 1000]).sum().item()
    return 100.0 * correct / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["mlp", "basicnet", "resnet18", "resnet50"], default="mlp")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: the workload's)")
    ap.add_argument("--batches", type=int, default=0, help="batches per epoch (0: all)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", action="store_true", help="test accuracy at the end")
    ap.add_argument("--data", default=ROOT)
    ap.add_argument("--mixed-precision", choices=["no", "bf16", "fp16"], default="no")
    ap.add_argument("--channels-last", action="store_true",
                    help="resnet*: model and batches in torch.channels_last")
    ap.add_argument("--cuda", action="store_true",
                    help="train on cuda:0 (model and preloaded data on the GPU)")
    args = ap.parse_args()
    dev = torch.device("cuda:0" if args.cuda else "cpu")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.backends.cudnn.benchmark = True
    amp = None
    if args.mixed_precision != "no":
        half = args.mixed_precision == "fp16"
        scaler = torch.amp.GradScaler(dev.type) if half else None
        amp = (torch.float16 if half else torch.bfloat16, scaler)
    model, loss_fn, opt, bs, prep = workload(args.workload)
    model.to(dev)  # in place: the optimizer keeps the same parameters
    if args.channels_last:
        model.to(memory_format=torch.channels_last)
        plain = prep
        prep = lambda b: plain(b).contiguous(memory_format=torch.channels_last)
    bs = args.batch or bs
    g = torch.Generator().manual_seed(args.seed)
    resnet = args.workload.startswith("resnet")
    if resnet:
        args.batches = args.batches or 10
        hw = 224 if args.workload == "resnet50" else 64
        x = torch.rand(args.batches * bs, 3, hw, hw, generator=g)
        y = torch.randint(0, 10, (args.batches * bs,), generator=g)
    else:
        x, y = load(args.data, "train")
    x, y = x.to(dev), y.to(dev)
    for _ in range(args.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        loss, steps = train_epoch(model, loss_fn, opt, bs, prep, x, y, g, args.batches, amp)
        # loss.item() in train_epoch waited for the device's queued work
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print(f"epoch_s {dt:.4f} step_ms {1e3 * dt / steps:.4f} cpu_s {dc:.4f} "
              f"cpu_step_ms {1e3 * dc / steps:.4f} last_loss {loss:.4f}", flush=True)
        if resnet:
            print(f"images_per_s {bs * steps / dt:.1f}", flush=True)
    if args.eval:
        tx, ty = load(args.data, "t10k")
        tx, ty = tx.to(dev), ty.to(dev)
        print(f"test_accuracy {accuracy(model, prep, tx, ty):.2f}")
    print(f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")


if __name__ == "__main__":
    main()
