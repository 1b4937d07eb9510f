"""One tokenized input aligned to words: what every forward pass of attnkit reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Encoding:
    """One tokenized input, aligned to words, ready for a forward pass.

    All per-position lists have the (possibly truncated) token length ``n``.
    """

    input_ids: list[int]
    tokens: list[str]
    roles: list[str]
    word_ids: list[int]
    segments: list[int]
    words: list[str]
    type_ids: list[int] | None = None
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    full_length: int | None = None  #: tokens before truncation

    def __len__(self) -> int:
        return len(self.input_ids)
