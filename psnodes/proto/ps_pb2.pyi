from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("name", "shape", "dtype", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    data: bytes
    def __init__(self, name: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class Rows(_message.Message):
    __slots__ = ("table", "ids", "dim", "data")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    table: str
    ids: bytes
    dim: int
    data: bytes
    def __init__(self, table: _Optional[str] = ..., ids: _Optional[bytes] = ..., dim: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Update(_message.Message):
    __slots__ = ("kind", "worker", "req_id", "clock", "dense", "sparse", "incarnation", "meta", "origin", "part")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PUSH: _ClassVar[Update.Kind]
        INIT: _ClassVar[Update.Kind]
        MIGRATE: _ClassVar[Update.Kind]
        FENCE: _ClassVar[Update.Kind]
        UNFENCE: _ClassVar[Update.Kind]
        ROUTE: _ClassVar[Update.Kind]
    PUSH: Update.Kind
    INIT: Update.Kind
    MIGRATE: Update.Kind
    FENCE: Update.Kind
    UNFENCE: Update.Kind
    ROUTE: Update.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    REQ_ID_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    kind: Update.Kind
    worker: str
    req_id: int
    clock: int
    dense: _containers.RepeatedCompositeFieldContainer[Tensor]
    sparse: _containers.RepeatedCompositeFieldContainer[Rows]
    incarnation: int
    meta: bytes
    origin: int
    part: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, kind: _Optional[_Union[Update.Kind, str]] = ..., worker: _Optional[str] = ..., req_id: _Optional[int] = ..., clock: _Optional[int] = ..., dense: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., sparse: _Optional[_Iterable[_Union[Rows, _Mapping]]] = ..., incarnation: _Optional[int] = ..., meta: _Optional[bytes] = ..., origin: _Optional[int] = ..., part: _Optional[_Iterable[int]] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("shard", "epoch", "update", "routing_epoch")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    shard: int
    epoch: int
    update: Update
    routing_epoch: int
    def __init__(self, shard: _Optional[int] = ..., epoch: _Optional[int] = ..., update: _Optional[_Union[Update, _Mapping]] = ..., routing_epoch: _Optional[int] = ...) -> None: ...

class PushReply(_message.Message):
    __slots__ = ("epoch", "seq", "duplicate", "node", "routing_epoch", "applied_on", "applied_as")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_ON_FIELD_NUMBER: _ClassVar[int]
    APPLIED_AS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    seq: int
    duplicate: bool
    node: str
    routing_epoch: int
    applied_on: int
    applied_as: str
    def __init__(self, epoch: _Optional[int] = ..., seq: _Optional[int] = ..., duplicate: _Optional[bool] = ..., node: _Optional[str] = ..., routing_epoch: _Optional[int] = ..., applied_on: _Optional[int] = ..., applied_as: _Optional[str] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("shard", "epoch", "since_seq", "names", "sparse", "min_clock", "worker", "no_dense", "routing_epoch")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    MIN_CLOCK_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    NO_DENSE_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    shard: int
    epoch: int
    since_seq: int
    names: _containers.RepeatedScalarFieldContainer[str]
    sparse: _containers.RepeatedCompositeFieldContainer[Rows]
    min_clock: int
    worker: str
    no_dense: bool
    routing_epoch: int
    def __init__(self, shard: _Optional[int] = ..., epoch: _Optional[int] = ..., since_seq: _Optional[int] = ..., names: _Optional[_Iterable[str]] = ..., sparse: _Optional[_Iterable[_Union[Rows, _Mapping]]] = ..., min_clock: _Optional[int] = ..., worker: _Optional[str] = ..., no_dense: _Optional[bool] = ..., routing_epoch: _Optional[int] = ...) -> None: ...

class PullReply(_message.Message):
    __slots__ = ("epoch", "seq", "dense", "sparse", "bytes", "node", "state_crc", "routing_epoch", "committed")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    STATE_CRC_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    seq: int
    dense: _containers.RepeatedCompositeFieldContainer[Tensor]
    sparse: _containers.RepeatedCompositeFieldContainer[Rows]
    bytes: int
    node: str
    state_crc: int
    routing_epoch: int
    committed: int
    def __init__(self, epoch: _Optional[int] = ..., seq: _Optional[int] = ..., dense: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., sparse: _Optional[_Iterable[_Union[Rows, _Mapping]]] = ..., bytes: _Optional[int] = ..., node: _Optional[str] = ..., state_crc: _Optional[int] = ..., routing_epoch: _Optional[int] = ..., committed: _Optional[int] = ...) -> None: ...

class LogEntry(_message.Message):
    __slots__ = ("seq", "epoch", "payload")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    epoch: int
    payload: bytes
    def __init__(self, seq: _Optional[int] = ..., epoch: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...

class ReplicateRequest(_message.Message):
    __slots__ = ("shard", "epoch", "primary", "entries", "primary_seq", "epoch_start", "state", "primary_seq_epoch")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_SEQ_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_SEQ_EPOCH_FIELD_NUMBER: _ClassVar[int]
    shard: int
    epoch: int
    primary: str
    entries: _containers.RepeatedCompositeFieldContainer[LogEntry]
    primary_seq: int
    epoch_start: int
    state: bytes
    primary_seq_epoch: int
    def __init__(self, shard: _Optional[int] = ..., epoch: _Optional[int] = ..., primary: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[LogEntry, _Mapping]]] = ..., primary_seq: _Optional[int] = ..., epoch_start: _Optional[int] = ..., state: _Optional[bytes] = ..., primary_seq_epoch: _Optional[int] = ...) -> None: ...

class ReplicateReply(_message.Message):
    __slots__ = ("applied_seq", "epoch", "seq_epoch", "suspecting")
    APPLIED_SEQ_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUSPECTING_FIELD_NUMBER: _ClassVar[int]
    applied_seq: int
    epoch: int
    seq_epoch: int
    suspecting: bool
    def __init__(self, applied_seq: _Optional[int] = ..., epoch: _Optional[int] = ..., seq_epoch: _Optional[int] = ..., suspecting: _Optional[bool] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("shard",)
    SHARD_FIELD_NUMBER: _ClassVar[int]
    shard: int
    def __init__(self, shard: _Optional[int] = ...) -> None: ...

class SnapshotReply(_message.Message):
    __slots__ = ("seq", "path", "bytes")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    path: str
    bytes: int
    def __init__(self, seq: _Optional[int] = ..., path: _Optional[str] = ..., bytes: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("checksum", "applied", "audit", "probe", "holdings", "holdings_under")
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    HOLDINGS_FIELD_NUMBER: _ClassVar[int]
    HOLDINGS_UNDER_FIELD_NUMBER: _ClassVar[int]
    checksum: bool
    applied: bool
    audit: bool
    probe: bool
    holdings: bool
    holdings_under: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, checksum: _Optional[bool] = ..., applied: _Optional[bool] = ..., audit: _Optional[bool] = ..., probe: _Optional[bool] = ..., holdings: _Optional[bool] = ..., holdings_under: _Optional[_Iterable[int]] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("node", "shard", "role", "epoch", "seq", "checksum", "isr", "applied_json", "log_start", "seq_epoch", "restored_from", "pushes", "audit_json", "routing_epoch", "routing_shards", "buckets_json", "fence", "holdings_json")
    NODE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    APPLIED_JSON_FIELD_NUMBER: _ClassVar[int]
    LOG_START_FIELD_NUMBER: _ClassVar[int]
    SEQ_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FROM_FIELD_NUMBER: _ClassVar[int]
    PUSHES_FIELD_NUMBER: _ClassVar[int]
    AUDIT_JSON_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROUTING_SHARDS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_JSON_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    HOLDINGS_JSON_FIELD_NUMBER: _ClassVar[int]
    node: str
    shard: int
    role: str
    epoch: int
    seq: int
    checksum: str
    isr: _containers.RepeatedScalarFieldContainer[str]
    applied_json: str
    log_start: int
    seq_epoch: int
    restored_from: str
    pushes: int
    audit_json: str
    routing_epoch: int
    routing_shards: _containers.RepeatedScalarFieldContainer[int]
    buckets_json: str
    fence: str
    holdings_json: str
    def __init__(self, node: _Optional[str] = ..., shard: _Optional[int] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., seq: _Optional[int] = ..., checksum: _Optional[str] = ..., isr: _Optional[_Iterable[str]] = ..., applied_json: _Optional[str] = ..., log_start: _Optional[int] = ..., seq_epoch: _Optional[int] = ..., restored_from: _Optional[str] = ..., pushes: _Optional[int] = ..., audit_json: _Optional[str] = ..., routing_epoch: _Optional[int] = ..., routing_shards: _Optional[_Iterable[int]] = ..., buckets_json: _Optional[str] = ..., fence: _Optional[str] = ..., holdings_json: _Optional[str] = ...) -> None: ...

class MigrateRequest(_message.Message):
    __slots__ = ("op", "shard", "migration", "src", "dst", "to", "since_seq", "since_epoch", "state", "part", "from_shard", "routing_epoch")
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        EXPORT: _ClassVar[MigrateRequest.Op]
        IMPORT: _ClassVar[MigrateRequest.Op]
        FENCE: _ClassVar[MigrateRequest.Op]
        UNFENCE: _ClassVar[MigrateRequest.Op]
        ROUTE: _ClassVar[MigrateRequest.Op]
    EXPORT: MigrateRequest.Op
    IMPORT: MigrateRequest.Op
    FENCE: MigrateRequest.Op
    UNFENCE: MigrateRequest.Op
    ROUTE: MigrateRequest.Op
    OP_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    SINCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    FROM_SHARD_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    op: MigrateRequest.Op
    shard: int
    migration: str
    src: _containers.RepeatedScalarFieldContainer[int]
    dst: _containers.RepeatedScalarFieldContainer[int]
    to: int
    since_seq: int
    since_epoch: int
    state: bytes
    part: str
    from_shard: int
    routing_epoch: int
    def __init__(self, op: _Optional[_Union[MigrateRequest.Op, str]] = ..., shard: _Optional[int] = ..., migration: _Optional[str] = ..., src: _Optional[_Iterable[int]] = ..., dst: _Optional[_Iterable[int]] = ..., to: _Optional[int] = ..., since_seq: _Optional[int] = ..., since_epoch: _Optional[int] = ..., state: _Optional[bytes] = ..., part: _Optional[str] = ..., from_shard: _Optional[int] = ..., routing_epoch: _Optional[int] = ...) -> None: ...

class MigrateReply(_message.Message):
    __slots__ = ("seq", "seq_epoch", "state", "key_bytes", "keys", "full", "routing_epoch", "node")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SEQ_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    KEY_BYTES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    ROUTING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    seq_epoch: int
    state: bytes
    key_bytes: int
    keys: int
    full: bool
    routing_epoch: int
    node: str
    def __init__(self, seq: _Optional[int] = ..., seq_epoch: _Optional[int] = ..., state: _Optional[bytes] = ..., key_bytes: _Optional[int] = ..., keys: _Optional[int] = ..., full: _Optional[bool] = ..., routing_epoch: _Optional[int] = ..., node: _Optional[str] = ...) -> None: ...

class Blob(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...
