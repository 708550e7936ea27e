"""Packing an object's JSON for the SQLite file: zstd with a dictionary of its kind (issue 44).

Why: an object's JSON is a large part of a mirror (583 bytes an object on average, of the ~1,510
bytes an object the file of the benchmark's 110k-object mirror took), and objects of one kind repeat the same keys and shapes, which
a small per-kind dictionary holds once (`syncd.state.dictionaries` trains and keeps them in the
file). Measured on that mirror: zstd level 3 with a 16 KB dictionary per kind keeps ~98 bytes
an object (zlib 346, zstd without a dictionary 363, zlib with a preset dictionary 92 at three
times the CPU), packing 110k objects in ~0.2 s of CPU.

A stored value (`resources.data` on SQLite) is one of:
- text: the object's JSON as it came (what files older than migration 0006 hold, what a value
  is before the merge packs it, and what packing would not make shorter);
- a BLOB: `VERSION` (one byte), the dictionary's id as an unsigned LEB128 varint (0: none),
  then one zstd frame that records its content size (no checksum, no dictionary id: the
  header says which dictionary; the file's pages are checked by SQLite).

Unpacking is bounded: a frame must state its content size, at most `MAX_PACKED` (values
longer than that are stored as text, so a BLOB claiming more is damaged, not a memory bomb),
and must give exactly that many bytes. A damaged value raises `PackedDataError` (one line,
`StoreReads._json` names the file and object); in SQL, `syncd_json` gives NULL for it.

SQL functions, on every connection syncd opens to a state file (`connect`, `of`):
- `syncd_pack(kind, data)`: `data` as the merge stores it: text packed (with the kind's
  current dictionary, `use`), a BLOB as it is (a row carried forward is already packed);
- `syncd_json(data)`: the JSON text of a stored value, e.g. `json_extract(syncd_json(data),
  '$.title')`; NULL for a damaged one. Other programs (Datasette, the sqlite3 shell) do not
  have it: they see the BLOBs, and the view `current_resources` shows them as they are;
- `syncd_stored_hash(hash)`: a hash in the hex form of files before migration 0008 in the
  form stored since (`syncd.state.rows.stored_of_hex`), for that migration.

The PostgreSQL state keeps its `json` column: nothing is packed there.
"""

from __future__ import annotations

import codecs
import functools
import sqlite3
import threading
from collections.abc import Mapping
from typing import Any

import zstandard

from syncd.state.errors import StateError
from syncd.state.rows import stored_of_hex

__all__ = ["LEVEL", "MAX_PACKED", "VERSION", "PackedConnection", "PackedDataError", "Packer", "connect", "install_plain", "of"]

VERSION = 1
"""The first byte of a packed value: the format above."""
LEVEL = 3
"""zstd's level: level 1 packed the mirror above 3% larger for the same CPU; higher levels cost
more CPU for little (the dictionary does most of the work)."""
TABLES_LOG = 13
"""The size of the compressor's hash and chain tables (2^13 entries each), for objects of a few
hundred bytes: level 3's own (2^17, 2^16) took 440 KB a dictionary's compressor, 9 MB for the
20 kinds of the benchmark's mirror (its peak RSS 81 -> 90 MB), for objects 0.3% smaller."""
MAX_PACKED = 64 << 20
"""The longest JSON that is packed: 64 MiB, the default answer-size limit (`max_answer_bytes`) an
object came through. A longer one is stored as text, so no packed value unpacks to more."""
MAX_DICTIONARY = 1 << 20
"""The largest dictionary read from a file (syncd trains 16 KB ones): a hand-made file's
dictionary of a gigabyte is damage, not something to load."""
_PIECE = 1 << 20
"""Bytes decoded at a time (`Packer.text`)."""
MIN_PACKED = 16
"""Shorter JSON is stored as text: a frame alone takes about 10 bytes."""


class PackedDataError(StateError):
    """A stored value that does not unpack (damaged, or not written by syncd)."""


@functools.cache
def _parameters() -> zstandard.ZstdCompressionParameters:
    """Level 3 with smaller tables (`TABLES_LOG`); the frame states its content size, and
    neither a checksum nor the dictionary's id (the header names it)."""
    return zstandard.ZstdCompressionParameters.from_level(
        LEVEL, hash_log=TABLES_LOG, chain_log=TABLES_LOG, write_content_size=1, write_checksum=0, write_dict_id=0
    )


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(value: bytes, offset: int) -> tuple[int, int]:
    number = shift = 0
    while offset < len(value) and shift < 35:
        byte = value[offset]
        number |= (byte & 0x7F) << shift
        offset += 1
        if not byte & 0x80:
            return number, offset
        shift += 7
    raise PackedDataError("its dictionary id is cut short")


class Packer:
    """Packs and unpacks the values of one connection's file, with the file's dictionaries.

    Dictionaries are read from the file when a value names one first (they never change once
    written, `syncd.state.dictionaries`); `forget` drops them all, for a transaction that wrote
    one and rolled back. zstd's contexts are not thread-safe: a decompressor per thread (reads
    come from any thread), and one compressor per dictionary, used under a lock (packing runs
    in the merge's statements, one connection's statements at a time)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._dictionaries: dict[int, zstandard.ZstdCompressionDict] = {}
        self._newest: dict[str, int] = {}
        self._packers: dict[str, tuple[bytes, Any]] = {}
        """kind -> (the header of its values, the compress method of its dictionary's compressor)."""
        self._generation = 0
        self._local = threading.local()
        self._lock = threading.RLock()
        self._packing = threading.Lock()

    # -- which dictionaries -----------------------------------------------------------------

    def use(self, newest: Mapping[str, int]) -> None:
        """Pack each kind with this dictionary (kind -> id); kinds not named, with none."""
        with self._lock:
            self._newest = dict(newest)
            self._packers = {}

    def add(self, dictionary_id: int, raw: bytes) -> None:
        """A dictionary just written to the file (in the caller's transaction)."""
        with self._lock:
            self._dictionaries[dictionary_id] = zstandard.ZstdCompressionDict(raw)

    def forget(self) -> None:
        """Drop what was read or added: the file is read again when a value needs it."""
        with self._lock:
            self._dictionaries.clear()
            self._newest, self._packers = {}, {}
            self._generation += 1

    def _dictionary(self, dictionary_id: int) -> zstandard.ZstdCompressionDict:
        with self._lock:
            found = self._dictionaries.get(dictionary_id)
            if found is None:
                try:
                    row = self._conn.execute(
                        "SELECT CASE WHEN length(dict) <= ? THEN dict END, length(dict) FROM dictionaries WHERE id = ?",
                        [MAX_DICTIONARY, dictionary_id],
                    ).fetchone()
                except sqlite3.DatabaseError as exc:
                    raise PackedDataError(f"its dictionary {dictionary_id} cannot be read ({exc})") from None
                if row is None:
                    raise PackedDataError(f"it names dictionary {dictionary_id}, which the file does not hold")
                if not isinstance(row[0], bytes):
                    raise PackedDataError(f"its dictionary {dictionary_id} is not one syncd trains ({row[1]} bytes, not a BLOB of at most {MAX_DICTIONARY})")
                found = self._dictionaries[dictionary_id] = zstandard.ZstdCompressionDict(row[0])
            return found

    def _packer(self, kind: str) -> tuple[bytes, Any]:
        with self._lock:
            dictionary_id = self._newest.get(kind, 0)
            same = next((packer for other, packer in self._packers.items() if self._newest.get(other, 0) == dictionary_id), None)
            if same is None:
                dictionary = self._dictionary(dictionary_id) if dictionary_id else None
                compressor = zstandard.ZstdCompressor(compression_params=_parameters(), dict_data=dictionary)
                same = (bytes((VERSION,)) + _varint(dictionary_id), compressor.compress)
            self._packers[kind] = same
            return same

    def _decompressor(self, dictionary_id: int) -> Any:
        """This thread's decompressor for a dictionary (0: none)."""
        local = self._local
        if getattr(local, "generation", None) != self._generation:
            local.generation, local.decompressors = self._generation, {}
        found = local.decompressors.get(dictionary_id)
        if found is None:
            dictionary = self._dictionary(dictionary_id) if dictionary_id else None
            found = local.decompressors[dictionary_id] = zstandard.ZstdDecompressor(dict_data=dictionary)
        return found

    # -- packing ----------------------------------------------------------------------------

    def pack(self, kind: str, text: Any) -> Any:
        """The value to store for the JSON `text` of an object of `kind`: packed, or `text`
        itself when packing would not make it shorter (or it is too short or too long). A
        value that is not text (packed already: a row carried forward) is returned as it is.
        The SQL function `syncd_pack` (one call an object a merge makes current: kept short)."""
        if type(text) is not str:
            return text
        raw = text.encode()
        size = len(raw)
        if size < MIN_PACKED or size > MAX_PACKED:
            return text
        try:
            header, compress = self._packers[kind]
        except KeyError:
            header, compress = self._packer(kind)
        with self._packing:
            packed = header + compress(raw)
        return packed if len(packed) < size else text

    def unpack(self, value: bytes) -> bytes:
        """The JSON (UTF-8 bytes) of a packed value; PackedDataError when it is damaged."""
        if len(value) < 2 or value[0] != VERSION:
            raise PackedDataError(f"it is binary but not packed by syncd (format byte {value[:1].hex() or 'missing'})")
        dictionary_id, offset = _read_varint(value, 1)
        frame = memoryview(value)[offset:]
        try:
            size = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as exc:
            raise PackedDataError(f"its zstd frame is damaged ({exc})") from None
        if size < 0 or size > MAX_PACKED:
            raise PackedDataError("its zstd frame states no content size" if size < 0 else f"its zstd frame claims {size} bytes, more than syncd packs")
        try:
            raw = self._decompressor(dictionary_id).decompress(frame, max_output_size=size)
        except zstandard.ZstdError as exc:
            raise PackedDataError(f"its zstd frame is damaged ({exc})") from None
        if len(raw) != size:
            raise PackedDataError(f"its zstd frame gave {len(raw)} bytes, not the {size} it states")
        return raw

    def text(self, value: bytes) -> str:
        """The JSON text of a packed value (PackedDataError; UnicodeDecodeError for bytes that
        are not UTF-8). A long one is decoded a megabyte at a time, its bytes let go before the
        pieces are joined: at most about twice its size held at once, where decoding it whole
        while its bytes are held takes three times (`tests/hostile/test_17_export_streams.py`)."""
        raw = self.unpack(value)
        if len(raw) <= _PIECE:
            return raw.decode()
        decoder = codecs.getincrementaldecoder("utf-8")()
        with memoryview(raw) as view:
            pieces = [decoder.decode(view[start : start + _PIECE]) for start in range(0, len(raw), _PIECE)]
        del raw
        pieces.append(decoder.decode(b"", final=True))
        return "".join(pieces)

    def json_of(self, value: Any) -> Any:
        """The JSON of a stored value: text as it is, a BLOB unpacked (bytes); PackedDataError."""
        return self.unpack(value) if isinstance(value, bytes) else value

    # -- the SQL functions ------------------------------------------------------------------

    def sql_json(self, data: Any) -> Any:
        if not isinstance(data, bytes):
            return data
        try:
            return self.text(data)
        except (PackedDataError, UnicodeDecodeError):
            return None

    def install(self, conn: sqlite3.Connection) -> None:
        conn.create_function("syncd_pack", 2, self.pack, deterministic=True)
        conn.create_function("syncd_json", 1, self.sql_json, deterministic=True)
        install_plain(conn)


def install_plain(conn: sqlite3.Connection) -> None:
    """The SQL functions that need no packer (`syncd_stored_hash`), on `conn`: a migration that
    calls one installs them on a connection that lacks them (a schema built in memory)."""
    conn.create_function("syncd_stored_hash", 1, stored_of_hex, deterministic=True)


class PackedConnection(sqlite3.Connection):
    """A connection to a state file with its `Packer` and the SQL functions (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.packer = Packer(self)
        self.packer.install(self)


def connect(*args: Any, **kwargs: Any) -> PackedConnection:
    """`sqlite3.connect` giving a `PackedConnection` (every connection syncd opens to a state file)."""
    conn = sqlite3.connect(*args, factory=PackedConnection, **kwargs)
    assert isinstance(conn, PackedConnection)
    return conn


def of(conn: sqlite3.Connection) -> Packer:
    """The packer of `conn`; a connection opened otherwise (a schema built in memory, a test's)
    gets a new one installed, so that a migration can run on it."""
    if isinstance(conn, PackedConnection):
        return conn.packer
    packer = Packer(conn)
    packer.install(conn)
    return packer
