"""A tiny random BERT backbone that tests build in well under a second.

Real training code paths run on it (tokenizer, encoder, export) without the
22M-parameter default model.
"""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "play music song songs artist album playlist add to my the a an please book table restaurant for "
    "two people tonight weather will it rain snow in tomorrow forecast rate this book stars out of five "
    "find movie schedule showing cinema search creative work show me set alarm wake up at am pm timer "
    "cancel what is how do i can you turn on off lights hotel taxi train flight from to cheap price "
    "balance account transfer money send pay bill order pizza call mom text message hi hello thanks "
    "um uh like so okay well actually basically just sorry mean yes no"
).split()


def make_tiny_backbone(directory: str | Path, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Write a random BERT (config, safetensors weights, WordPiece tokenizer) to ``directory``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = [f"##{c}" for c in letters] + [str(d) for d in range(10)] + list(".,?!'&-:")
    vocab = list(dict.fromkeys(specials + WORDS + letters + pieces))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=hidden * 2, max_position_embeddings=128,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(directory, safe_serialization=True)
    return directory


def default_splits() -> tuple[str, str, str]:
    """The embedded default data's train, valid and test files (JSONL, with spans)."""
    from intentvcs.training import DEFAULT_DATA

    return tuple(str(DEFAULT_DATA / f"{split}.jsonl") for split in ("train", "valid", "test"))


def train_cli(backbone: str | Path, out: str | Path, *extra: str, train: str | None = None,
              valid: str | None = None, epochs: int = 2) -> int:
    """``intentvcs train`` on the tiny ``backbone`` (default data unless ``train``/``valid`` are given), batch
    64; its exit code."""
    from intentvcs.cli.main import main

    default_train, default_valid, _ = default_splits()
    return main(["train", "--train", train or default_train, "--valid", valid or default_valid, "--out", str(out),
                 "--backbone", str(backbone), "--epochs", str(epochs), "--batch-size", "64", *extra])
