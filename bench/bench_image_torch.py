"""PyTorch side of bench_image: the same pipeline (decode + RandomResizedCrop(224)
+ RandomHorizontalFlip + ToTensor + Normalize) through torch's DataLoader at 0, 1
and 2 workers, over the JPEGs bench_image wrote. Run with /usr/bin/python3:

    ./build/bench/bench_image && /usr/bin/python3 bench/bench_image_torch.py

Uses torchvision when it is installed. Without it, a PIL equivalent of the
same transforms is used and the output says so: torchvision's PIL code path
does the same PIL calls (crop + resize with BILINEAR, which antialiases when
shrinking, FLIP_LEFT_RIGHT, then from_numpy / permute / float().div(255) and
sub/div), with its parameter draws reimplemented below.
"""
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image

try:
    import torchvision  # noqa: F401
    from torchvision import datasets, transforms

    HAVE_TV = True
except ImportError:
    HAVE_TV = False

ROOT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ct_bench_images"
MEAN = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
STD = torch.tensor([0.229, 0.224, 0.225])[:, None, None]


def rrc_params(height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params."""
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        aspect = math.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1]).item())
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            i = torch.randint(0, height - h + 1, size=(1,)).item()
            j = torch.randint(0, width - w + 1, size=(1,)).item()
            return i, j, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class PilPipeline:
    def __call__(self, img):
        i, j, h, w = rrc_params(img.height, img.width)
        img = img.resize((224, 224), Image.BILINEAR, box=(j, i, j + w, i + h))
        if torch.rand(1) < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        t = torch.from_numpy(np.array(img, copy=True)).permute(2, 0, 1).float().div(255)
        return t.sub_(MEAN).div_(STD)


class Folder(torch.utils.data.Dataset):
    """torchvision's ImageFolder without torchvision."""

    def __init__(self, root, transform):
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.samples = [(os.path.join(root, c, f), k) for k, c in enumerate(classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.transform(img), label


def main():
    if HAVE_TV:
        tf = transforms.Compose([transforms.RandomResizedCrop(224),
                                 transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(),
                                 transforms.Normalize([0.485, 0.456, 0.406],
                                                      [0.229, 0.224, 0.225])])
        ds = datasets.ImageFolder(ROOT, transform=tf)
        how = "torchvision %s" % torchvision.__version__
    else:
        ds = Folder(ROOT, PilPipeline())
        how = ("torchvision is NOT installed for this python: PIL %s equivalent of its "
               "transforms" % Image.__version__)
    reps = 5
    print("bench_image_torch: torch %s, %s; %d images, batch 32, shuffle, median of %d "
          "epochs (after one warm-up epoch)" % (torch.__version__, how, len(ds), reps))
    print("  %-8s %12s %10s" % ("workers", "images/s", "epoch s"))
    for nw in range(3):
        dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=nw,
                                         persistent_workers=nw > 0)
        times = []
        for r in range(reps + 1):
            t0 = time.perf_counter()
            for _ in dl:
                pass
            if r > 0:
                times.append(time.perf_counter() - t0)
        m = statistics.median(times)
        print("  %-8d %12.0f %10.3f" % (nw, len(ds) / m, m))


if __name__ == "__main__":
    main()
