"""PyTorch counterpart of examples/train_mnist.c for the whole-process benchmark
(start-up, data loading, training, validation and the test evaluation):

    /usr/bin/python3 bench/train_mnist_torch.py [--epochs N] [--threads N]

The 784-128-64-10 MLP on Fashion-MNIST, CrossEntropyLoss, SGD (lr 0.001,
momentum 0.9), batch 32 on a seeded 55 000 / 5 000 train / validation split
of the training set, the validation loss after each epoch, then the accuracy
on the 10 000 test images at batch 64. A plain loop over preloaded tensors
(bench_trainer_torch.py's), which is PyTorch's fastest way to run it.
Prints the test accuracy last.
"""
import argparse

import torch

from bench_trainer_torch import ROOT, load, train_epoch, workload


@torch.no_grad()
def evaluate(model, loss_fn, prep, x, y, bs):
    """Mean loss and accuracy (%) over (x, y) in batches of bs."""
    model.eval()
    total, correct = 0.0, 0
    for i in range(0, len(x), bs):
        out = model(prep(x[i : i + bs]))
        total += loss_fn(out, y[i : i + bs]).item() * len(out)
        correct += (out.argmax(1) == y[i : i + bs]).sum().item()
    return total / len(x), 100.0 * correct / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=ROOT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    x, y = load(args.data, "train")
    perm = torch.randperm(len(x), generator=g)
    tr, va = perm[:55000], perm[55000:]
    model, loss_fn, opt, bs, prep = workload("mlp")
    for epoch in range(args.epochs):
        loss, _ = train_epoch(model, loss_fn, opt, bs, prep, x[tr], y[tr], g, 0, None)
        vloss, _ = evaluate(model, loss_fn, prep, x[va], y[va], bs)
        print(f"epoch {epoch + 1} train_loss {loss:.4f} eval_loss {vloss:.4f}")
    tx, ty = load(args.data, "t10k")
    print(f"test accuracy {evaluate(model, loss_fn, prep, tx, ty, 64)[1]:.2f}%")


if __name__ == "__main__":
    main()
