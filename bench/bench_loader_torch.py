"""PyTorch side of bench_loader: one shuffled epoch of the 60 000 Fashion-MNIST
training images through torch.utils.data.DataLoader, batch 64, with a
per-sample ToTensor + Normalize equivalent (u8 (28, 28) -> f32 (1, 28, 28),
(v/255 - 0.2860) / 0.3530), at 0, 1 and 2 workers. Prints samples/s, the
median of --reps epochs, in bench_loader's format. Run with /usr/bin/python3,
right after bench_loader:

    OMP_NUM_THREADS=2 ./build/bench/bench_loader && \
        OMP_NUM_THREADS=2 /usr/bin/python3 bench/bench_loader_torch.py

The IDX files are read with gzip + numpy (torchvision is not installed for
/usr/bin/python3). torchvision's ToTensor does the same per-sample work for a
u8 array: from_numpy, a channel dim, float().div(255); Normalize then
sub_/div_. Workers are persistent (started once, like bench_loader's
threads) so epoch times do not include worker start-up.
"""
import argparse
import gzip
import os
import statistics
import struct
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

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
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
    return arr.copy()  # writable, as torch.from_numpy wants


def find(root, name):
    gz = os.path.join(root, name + ".gz")
    return gz if os.path.exists(gz) else os.path.join(root, name)


class FashionMnist(Dataset):
    def __init__(self, root):
        self.images = read_idx(find(root, "train-images-idx3-ubyte"))
        self.labels = read_idx(find(root, "train-labels-idx1-ubyte")).astype(np.int64)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        # ToTensor: u8 (H, W) -> f32 (1, H, W) in [0, 1]; then Normalize
        x = torch.from_numpy(self.images[i]).unsqueeze(0).float().div(255)
        x = x.sub_(MEAN).div_(STD)
        return x, int(self.labels[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-workers", type=int, default=2)
    args = ap.parse_args()

    t0 = time.perf_counter()
    ds = FashionMnist(args.data)
    n = len(ds)
    print(
        f"bench_loader_torch: Fashion-MNIST train, {n} samples, read in "
        f"{time.perf_counter() - t0:.2f} s; batch {args.batch}, shuffle, per-sample "
        f"ToTensor+Normalize; torch {torch.__version__}, {torch.get_num_threads()} "
        f"intra-op threads"
    )
    print(f"{'workers':<8} {'samples/s':>12} {'epoch s':>10}")
    for nw in range(args.max_workers + 1):
        g = torch.Generator()
        g.manual_seed(0)
        dl = DataLoader(
            ds,
            batch_size=args.batch,
            shuffle=True,
            num_workers=nw,
            generator=g,
            persistent_workers=nw > 0,
        )
        times = []
        for _ in range(args.reps):
            t = time.perf_counter()
            seen = 0
            for x, y in dl:
                seen += len(y)
            times.append(time.perf_counter() - t)
            assert seen == n and x.dtype == torch.float32 and x.shape[1:] == (1, 28, 28)
        med = statistics.median(times)
        print(f"{nw:<8d} {n / med:12.0f} {med:10.3f}")
        del dl


if __name__ == "__main__":
    main()
