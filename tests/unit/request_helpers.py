"""Helpers shared by the request-module tests (test_requests.py, test_admin_requests.py)."""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from types import ModuleType
from typing import Any, TypeAlias

import pytest

from kgroup.errors import KafkaProtocolError
from kgroup.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    VersionRange,
    decode_request,
    encode_request,
    negotiate,
    response_class,
)
from kgroup.protocol.negotiation import NegotiatedVersions


def at(api: ApiKey, version: int) -> NegotiatedVersions:
    """Versions negotiated with a broker that supports only ``version`` of ``api``."""
    return negotiate({api: VersionRange(version, version)})


def lowest(api: ApiKey) -> NegotiatedVersions:
    return at(api, SUPPORTED_VERSIONS[api].min)


def highest(api: ApiKey) -> NegotiatedVersions:
    return at(api, SUPPORTED_VERSIONS[api].max)


def wire(request: Any) -> Any:
    """``request`` after a trip through a whole frame, as a broker reads it."""
    sent: Any = decode_request(encode_request(request, 7, "kgroup")).request
    assert sent == request
    return sent


def response_union(module: ModuleType) -> tuple[Any, ...]:
    """The classes of ``module.Response``, the union the type checker reads.

    ``Response`` is defined under ``if TYPE_CHECKING:`` (importing every version
    at run time cost a consumer kio modules it never used); this runs that block,
    following an import of another request module's ``Response``.
    """
    tree = ast.parse(inspect.getsource(module))
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "Response" for a in node.names):
            assert node.module is not None
            return response_union(importlib.import_module(node.module))
    namespace: dict[str, Any] = {"TypeAlias": TypeAlias}
    # Names the module imported at run time (a version kept for an isinstance check).
    namespace.update(vars(module))
    exec(compile(ast.Module(body=block.body, type_ignores=[]), module.__name__, "exec"), namespace)
    return typing.get_args(namespace["Response"]) or (namespace["Response"],)


def assert_narrows_exactly_the_negotiated_versions(module: ModuleType) -> None:
    """``module.narrow`` passes a response of each negotiated version and refuses the
    versions next to the range; ``module.Response`` names exactly those versions."""
    classes = response_union(module)
    (api,) = {int(c.__api_key__) for c in classes}
    supported = SUPPORTED_VERSIONS[ApiKey(api)]
    negotiated = list(range(supported.min, supported.max + 1))
    assert sorted(int(c.__version__) for c in classes) == negotiated
    for cls in classes:
        payload = cls.__new__(cls)  # isinstance is all narrow looks at
        assert module.narrow(payload) is payload
    for version in (supported.min - 1, supported.max + 1):
        try:
            cls = response_class(api, version)
        except KeyError:
            continue  # kio has no such version
        with pytest.raises(KafkaProtocolError, match=f"v{version} of API key {api}"):
            module.narrow(cls.__new__(cls))
