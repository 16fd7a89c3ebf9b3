"""Hand-rolled protobuf wire encoding for the three hot paths, byte-compatible with ps.proto.

The generated classes copy every bytes field at least once more than needed: a push would be
parsed, then serialized again for the update log, and a pull would copy each tensor into a
message and then into the wire. Here a push keeps a zero-copy view of its Update bytes for the
log, and pull replies and replication calls are joined straight from the arrays' buffers. Tests
check these encoders against the generated parser.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.proto import ps_pb2

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


#: the encodings of 0 .. 2**14 - 1 (one or two bytes): every field key and most lengths, which a
#: pull reply or a replicate call encodes a few per tensor; a lookup, not a loop, on the hot path
_SMALL = tuple(_varint(n) for n in range(1 << 14))


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int."""
    if 0 <= n < 16384:
        return _SMALL[n]
    if n < 0:                   # its loop would never end: a negative int has no end of bits
        raise ValueError(f"varint of a negative number {n}; protobuf encodes int64 fields as unsigned")
    return _varint(n)


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _key(field: int, wt: int) -> bytes:
    return varint((field << 3) | wt)


def _uint(field: int, n: int) -> list:
    return [_key(field, _VARINT), varint(n)] if n else []


def _bytes(field: int, data) -> list:
    n = len(data) if not isinstance(data, memoryview) else data.nbytes
    return [_key(field, _LEN), varint(n), data] if n else []


def _sub(field: int, parts: list) -> list:
    n = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
    return [_key(field, _LEN), varint(n), *parts]


def parse(cls, raw: bytes, method: str):
    """The one decoding boundary: `raw` parsed exactly as protobuf parses it, or InvalidArgument
    naming the method and message (never gRPC's INTERNAL "Exception deserializing request!")."""
    try:
        return cls.FromString(raw)
    except Exception as e:  # noqa: BLE001 - DecodeError, or anything upb raises on hostile bytes
        raise InvalidArgument(f"{method}: the request does not parse as pschaos.ps.{cls.__name__} "
                              f"({type(e).__name__}: {e}); encode it from psnodes/proto/ps.proto") from None


def _skip(view: memoryview, pos: int, wt: int, field: int) -> int:
    """Position after one field value of wire type `wt` (a group: after its matching end)."""
    if wt == _VARINT:
        return read_varint(view, pos)[1]
    if wt == _I64:
        return pos + 8
    if wt == _I32:
        return pos + 4
    if wt == _LEN:
        n, pos = read_varint(view, pos)
        return pos + n
    if wt == _SGROUP:
        while True:
            key, pos = read_varint(view, pos)
            if key & 7 == _EGROUP:
                if key >> 3 != field:
                    raise ValueError(f"group {field} closed by end of group {key >> 3}")
                return pos
            pos = _skip(view, pos, key & 7, key >> 3)
    raise ValueError(f"wire type {wt} of field {field}")


def split_push(raw: bytes) -> tuple[ps_pb2.PushRequest, memoryview | bytes]:
    """Parse a PushRequest and return, beside it, the bytes of its `update` field.

    Whatever protobuf accepts is accepted and whatever it refuses is refused (InvalidArgument):
    the request is parsed by the generated parser first, and only then walked. When `update`
    occurs once, the result is a zero-copy view of it exactly as the client encoded it, so every
    Update field (the idempotency key included) reaches the log and the replicas as sent. When it
    occurs more than once, protobuf merges the occurrences: then the merged message is serialized,
    so the log holds what the primary applied, never just the last occurrence."""
    req = parse(ps_pb2.PushRequest, raw, "Push")
    view = memoryview(raw)
    spans: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < len(view):
            key, pos = read_varint(view, pos)
            field, wt = key >> 3, key & 7
            if field == 3 and wt == _LEN:
                n, pos = read_varint(view, pos)
                spans.append((pos, pos + n))
                pos += n
            else:
                pos = _skip(view, pos, wt, field)
    except (ValueError, IndexError) as e:   # protobuf took it, so this is our walker's gap: say so
        raise InvalidArgument(f"Push: the request could not be split ({e}); encode it from ps.proto") from None
    if len(spans) == 1:
        return req, view[spans[0][0]:spans[0][1]]
    return req, req.update.SerializeToString() if spans else b""


def tensor_parts(name: str, shape: Sequence[int], data) -> list:
    packed = b"".join(varint(d) for d in shape)
    return [*_bytes(1, name.encode()), *_bytes(2, packed), *_bytes(3, b"float32"), *_bytes(4, data)]


def rows_parts(table: str, ids, dim: int, data) -> list:
    return [*_bytes(1, table.encode()), *_bytes(2, ids), *_uint(3, dim), *_bytes(4, data)]


def encode_pull_reply(epoch: int, seq: int, node: str, dense: Iterable[tuple[str, Sequence[int], object]],
                      sparse: Iterable[tuple[str, object, int, object]], state_crc: int | None = None,
                      routing_epoch: int = 0, committed: int | None = None) -> bytes:
    """A serialized PullReply; `bytes` is the size of everything else in the reply. `state_crc`
    (pschaos.psnodes.store.digest) and `committed` (sync mode's ISR watermark at the read) are
    written whenever given, 0 included: the fields have presence."""
    parts: list = [*_uint(1, epoch), *_uint(2, seq)]
    for name, shape, data in dense:
        parts += _sub(3, tensor_parts(name, shape, data))
    for table, ids, dim, data in sparse:
        parts += _sub(4, rows_parts(table, ids, dim, data))
    parts += _bytes(6, node.encode())
    if state_crc is not None:
        if not 0 <= state_crc < 1 << 32:
            raise ValueError(f"state_crc={state_crc} is not a CRC-32 (0 <= crc < 2**32)")
        parts += [_key(7, _VARINT), varint(state_crc)]
    parts += _uint(8, routing_epoch)
    if committed is not None:
        parts += [_key(9, _VARINT), varint(committed)]
    size = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
    parts += _uint(5, size)
    return b"".join(parts)


def committed_field(committed: int) -> bytes:
    """PullReply field 9 (`committed`), appended to an encoded reply once its read index is
    replicated (ShardNode.pull): protobuf takes fields in any order, and `bytes` does not count it."""
    return b"".join([_key(9, _VARINT), varint(committed)])


def encode_replicate(shard: int, epoch: int, primary: str, entries: Iterable, primary_seq: int,
                     epoch_start: int, state: bytes = b"", primary_seq_epoch: int = 0) -> bytes:
    """A serialized ReplicateRequest; entries are (seq, epoch, payload) with payload any buffer."""
    parts: list = [*_uint(1, shard), *_uint(2, epoch), *_bytes(3, primary.encode())]
    for e in entries:
        parts += _sub(4, [*_uint(1, e.seq), *_uint(2, e.epoch), *_bytes(3, e.payload)])
    parts += [*_uint(5, primary_seq), *_uint(6, epoch_start), *_bytes(8, state), *_uint(9, primary_seq_epoch)]
    return b"".join(parts)
