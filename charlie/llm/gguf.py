"""Reading a GGUF file's header: the key-value metadata and the list of tensors, never the
weights.

GGUF is llama.cpp's model format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
the magic `GGUF`, a version (2 or 3; 1 is long obsolete), the number of tensors and of
metadata pairs, the pairs (a key, a value type, the value), the tensors' descriptions (name,
shape, type, offset), then the weights, aligned. Everything is little-endian. The file is
memory-mapped, so only the pages of the header are read, even of a model of many gigabytes.

Every length and count read from the file is checked against the file's size before it is
used: a damaged or cut-short file is refused with what is wrong, never read past its end.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from charlie.errors import ModelRefused

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ARRAY_KEPT = 64  # longer arrays (the tokenizer's 150,000 tokens) are skipped, not kept

# Scalar value types: the number GGUF gives each, and how struct reads it.
_SCALARS: dict[int, str] = {
    0: "<B",  # uint8
    1: "<b",  # int8
    2: "<H",  # uint16
    3: "<h",  # int16
    4: "<I",  # uint32
    5: "<i",  # int32
    6: "<f",  # float32
    7: "<?",  # bool
    10: "<Q",  # uint64
    11: "<q",  # int64
    12: "<d",  # float64
}
_STRING = 8
_ARRAY = 9

Value = str | int | float | bool | list["Value"]


@dataclass(frozen=True)
class Skipped:
    """An array too long to keep (the tokenizer's vocabulary): only its length."""

    length: int


@dataclass(frozen=True)
class Header:
    """What a GGUF file says about itself."""

    version: int
    tensors: int
    metadata: dict[str, Value | Skipped]
    data_start: int  # where the weights begin
    data_end: int  # where the furthest tensor begins (its size is not computed here)

    def text(self, key: str) -> str | None:
        value = self.metadata.get(key)
        return value if isinstance(value, str) else None

    def number(self, key: str) -> int | None:
        value = self.metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value

    @property
    def architecture(self) -> str | None:
        return self.text("general.architecture")

    def of_architecture(self, key: str) -> int | None:
        """A number under the architecture's own prefix: `qwen2.block_count`, say."""
        return self.number(f"{self.architecture}.{key}") if self.architecture else None

    @property
    def chat_template(self) -> str | None:
        template = self.text("tokenizer.chat_template")
        return template if template and template.strip() else None


class _Reader:
    """Reads GGUF values from a buffer, refusing any read past its end."""

    def __init__(self, data: mmap.mmap | bytes, path: Path) -> None:
        self.data, self.path, self.at = data, path, 0

    def damaged(self, what: str) -> ModelRefused:
        return ModelRefused(
            f"{self.path} is damaged or cut short: {what} (at byte {self.at:,} of "
            f"{len(self.data):,}). Download it again."
        )

    def take(self, size: int, what: str) -> int:
        if size < 0 or self.at + size > len(self.data):
            raise self.damaged(f"{what} runs past the end of the file")
        start = self.at
        self.at += size
        return start

    def scalar(self, fmt: str, what: str) -> int | float | bool:
        size = struct.calcsize(fmt)
        start = self.take(size, what)
        value: int | float | bool = struct.unpack_from(fmt, self.data, start)[0]
        return value

    def count(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def string(self, what: str) -> str:
        length = self.count(f"the length of {what}")
        start = self.take(length, what)
        raw = bytes(self.data[start : start + length])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.damaged(f"{what} is not UTF-8 text") from None

    def skip_string(self, what: str) -> None:
        self.take(self.count(f"the length of {what}"), what)

    def item(self, kind: int, key: str) -> Value:
        if kind == _STRING:
            return self.string(f"the value of {key}")
        return self.scalar(_SCALARS[kind], f"the value of {key}")

    def value(self, kind: int, key: str) -> Value | Skipped:
        if kind in _SCALARS or kind == _STRING:
            return self.item(kind, key)
        if kind == _ARRAY:
            item = int(self.scalar("<I", f"the item type of {key}"))
            length = self.count(f"the length of {key}")
            if item not in _SCALARS and item != _STRING:
                raise self.damaged(f"{key} is an array of unknown type {item}")
            if length > ARRAY_KEPT:
                self._skip_items(item, length, key)
                return Skipped(length)
            return [self.item(item, key) for _ in range(length)]
        raise self.damaged(f"{key} has an unknown value type {kind}")

    def _skip_items(self, item: int, length: int, key: str) -> None:
        if item == _STRING:
            for _ in range(length):
                self.skip_string(f"an item of {key}")
        else:
            self.take(struct.calcsize(_SCALARS[item]) * length, f"the items of {key}")


def read_header(path: Path) -> Header:
    """The header of the GGUF file at `path`; `ModelRefused` saying what is wrong when it is
    not one (another format, an unsupported version, damaged or cut short)."""
    try:
        with path.open("rb") as source:
            size = path.stat().st_size
            if size < 24:
                raise ModelRefused(f"{path} is not a GGUF model file: it holds only {size} bytes.")
            with mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _parse(_Reader(data, path))
    except IsADirectoryError:
        raise ModelRefused(f"{path} is a folder, not a GGUF model file.") from None
    except FileNotFoundError:
        raise ModelRefused(f"There is no file {path}.") from None
    except PermissionError:
        raise ModelRefused(f"Charlie may not read {path} (permission denied).") from None


def _parse(reader: _Reader) -> Header:
    magic = bytes(reader.data[0:4])
    if magic != MAGIC:
        raise ModelRefused(
            f"{reader.path} is not a GGUF model file: it starts with {magic!r}, not "
            f"{MAGIC!r}. Charlie's built-in runtime (llama.cpp) reads GGUF files only; a model "
            "in another format (safetensors, .bin) needs converting, or its GGUF version."
        )
    reader.at = 4
    version = int(reader.scalar("<I", "the version"))
    if version not in VERSIONS:
        byteswapped = struct.unpack("<I", struct.pack(">I", version))[0]
        detail = (
            "a big-endian file, which llama.cpp reads on big-endian machines only"
            if byteswapped in VERSIONS
            else f"versions {' and '.join(map(str, VERSIONS))} are read"
        )
        raise ModelRefused(f"{reader.path} is GGUF version {version}: {detail}.")
    tensors = reader.count("the number of tensors")
    pairs = reader.count("the number of metadata keys")
    # Each pair and each tensor takes at least 12 bytes: more than the file could hold is
    # a damaged count, refused before a loop a billion long.
    if (pairs + tensors) * 12 > len(reader.data):
        raise reader.damaged(f"it claims {pairs:,} metadata keys and {tensors:,} tensors")
    metadata: dict[str, Value | Skipped] = {}
    for _ in range(pairs):
        key = reader.string("a metadata key")
        kind = int(reader.scalar("<I", f"the type of {key}"))
        metadata[key] = reader.value(kind, key)
    furthest = 0
    for _ in range(tensors):
        name = reader.string("a tensor's name")
        dims = int(reader.scalar("<I", f"the number of dimensions of {name}"))
        if dims > 8:
            raise reader.damaged(f"tensor {name} has {dims} dimensions")
        reader.take(8 * dims, f"the shape of {name}")
        reader.scalar("<I", f"the type of {name}")
        furthest = max(furthest, reader.count(f"the offset of {name}"))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
        raise reader.damaged(f"its alignment is {alignment!r}")
    data_start = -(-reader.at // alignment) * alignment
    header = Header(version, tensors, metadata, data_start, data_start + furthest)
    if not tensors:
        raise ModelRefused(
            f"{reader.path} holds no weights (no tensors): it is a vocabulary-only GGUF, not "
            "a model."
        )
    if header.data_end >= len(reader.data):
        raise ModelRefused(
            f"{reader.path} is cut short: its weights should reach past byte "
            f"{header.data_end:,}, and the file ends at {len(reader.data):,} (an unfinished "
            "download or copy?). Download it again."
        )
    return header
