"""Hugging Face Trainer over ringreduce.

    torchrun --standalone --nproc-per-node 2 examples/hf_trainer.py

Start the process group before `TrainingArguments`: the Trainer (through
Accelerate) then trains with DistributedDataParallel on that group.
`TrainingArguments(ddp_backend="ringreduce")` alone fails on the CPU
(transformers 4.57, Accelerate 1.15): Accelerate allows only gloo or mpi
there and raises "Your assigned backend ringreduce is not available, please
use gloo". And on a machine without a GPU pass `use_cpu=True`: without it
each process trains on its own, with no DDP, whatever the backend.

A tiny BERT built from a BertConfig (no download) learns a synthetic task:
is the first token of the sequence in the upper half of the vocabulary.
Every rank prints the loss of the first and last step (the Trainer's logged
loss: the mean over the ranks, rounded to 4 decimals) and a digest of its
final weights: equal on every rank, and equal to a run with
`--backend gloo` (at world 2 both backends add the same two gradients).
"""
import argparse
import hashlib
import tempfile

import torch
import torch.distributed as dist
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

import torch_ringreduce  # noqa: F401  (registers "ringreduce"; `import torch` also does)

VOCAB, LENGTH = 64, 16


class FirstTokenTask(torch.utils.data.Dataset):
    """Random token sequences; label 1 when the first token is >= VOCAB / 2.
    The same on every rank (seeded); the Trainer's sampler shards it."""

    def __init__(self, size, seed=1):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (size, LENGTH), generator=generator)
        self.labels = (self.ids[:, 0] >= VOCAB // 2).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
                "labels": self.labels[i]}


def digest(module):
    """sha256 of the weights' bytes: equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ringreduce")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args()

    dist.init_process_group(args.backend)  # first: the Trainer keeps a group it finds

    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=LENGTH, num_labels=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)  # the same initial weights everywhere
    model = BertForSequenceClassification(config)

    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir,
            use_cpu=not torch.cuda.is_available(),  # without a GPU: else no DDP
            max_steps=args.steps,
            per_device_train_batch_size=args.batch,
            learning_rate=args.lr,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(model=model, args=training_args,
                          train_dataset=FirstTokenTask(args.steps * args.batch * 2))
        trainer.train()

    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    wrapped = type(trainer.model_wrapped).__name__
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}: backend {dist.get_backend()}, "
          f"{wrapped}, loss {losses[0]:.5f} -> {losses[-1]:.5f}, "
          f"weights {digest(trainer.model)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
