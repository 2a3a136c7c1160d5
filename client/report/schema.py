"""The Spark schema of telemetry events, derived from :mod:`kgroup.telemetry.events`.

One flat struct holds the header fields and the union of every body's fields,
exactly as :func:`kgroup.telemetry.encode` writes them. Deriving it from the
dataclasses (rather than writing it out) keeps the report and the emitters
from drifting apart when the schema grows.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from types import NoneType, UnionType

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kgroup.telemetry.events import BODY_TYPES, SCHEMA_VERSION, CommittedOffset, EventHeader
from kgroup.types import TopicPartition

__all__ = ["EVENT_SCHEMA", "REQUIRED_FIELDS", "valid_event"]

_PARTITION = StructType(
    [StructField("topic", StringType()), StructField("partition", IntegerType())]
)
_OFFSET = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)


def _spark_type(hint: object) -> tuple[DataType, bool]:
    """(Spark type, optional) of one annotated field."""
    optional = False
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        hint, optional = args[0], True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return StringType(), optional
    simple: dict[object, DataType] = {
        int: LongType(),
        float: DoubleType(),
        str: StringType(),
        bool: BooleanType(),
        tuple[TopicPartition, ...]: ArrayType(_PARTITION),
        tuple[CommittedOffset, ...]: ArrayType(_OFFSET),
    }
    if hint not in simple:
        raise TypeError(f"no Spark type for telemetry field type {hint!r}")
    return simple[hint], optional


def _build() -> tuple[StructType, dict[str, tuple[str, ...]]]:
    fields: dict[str, DataType] = {"v": LongType(), "kind": StringType()}
    header_required = []
    for f in dataclasses.fields(EventHeader):
        spark_type, optional = _spark_type(typing.get_type_hints(EventHeader)[f.name])
        fields[f.name] = spark_type
        if not optional:
            header_required.append(f.name)
    required: dict[str, tuple[str, ...]] = {}
    for kind, cls in BODY_TYPES.items():
        hints = typing.get_type_hints(cls)
        body_required = []
        for f in dataclasses.fields(cls):
            spark_type, optional = _spark_type(hints[f.name])
            known = fields.setdefault(f.name, spark_type)
            if known != spark_type:
                raise TypeError(f"field {f.name!r} has two types in the telemetry schema")
            if not optional and f.default is dataclasses.MISSING:
                body_required.append(f.name)
        required[kind.value] = ("v", "kind", *header_required, *body_required)
    schema = StructType([StructField(name, t, nullable=True) for name, t in fields.items()])
    return schema, required


EVENT_SCHEMA, REQUIRED_FIELDS = _build()
"""The schema of a parsed event; and for each kind, the fields that must not be null."""


def valid_event() -> Column:
    """True for a row that is a telemetry event this report understands.

    A line that is not JSON parses to all nulls; a field of the wrong type
    parses to null. Either way a field the kind requires is null, and the row
    is counted as malformed rather than misread.

    Built as bit masks (one bit per field: which are present, which the row's
    kind requires) so that the expression stays small: a disjunction over
    every kind and field makes Spark's optimizer work very hard on the plans
    built on top of it.
    """
    names = EVENT_SCHEMA.fieldNames()
    bit = {name: 1 << i for i, name in enumerate(names)}
    present = F.lit(0).cast("long")
    for name in names:
        present = present + F.when(F.col(name).isNotNull(), F.lit(bit[name])).otherwise(F.lit(0))
    masks = F.create_map(
        *[
            item
            for kind, required in REQUIRED_FIELDS.items()
            for item in (F.lit(kind), F.lit(sum(bit[n] for n in required)).cast("long"))
        ]
    )
    mask = masks[F.col("kind")]
    return F.coalesce(
        (present.bitwiseAND(mask) == mask) & (F.col("v") <= SCHEMA_VERSION), F.lit(False)
    )
