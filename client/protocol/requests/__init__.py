"""One module per Kafka API kgroup sends: build the kio request, parse the response.

Every module has the same shape:

- ``build(versions, <typed input>) -> RequestPayload``: the request at the version
  negotiated with the broker it goes to (``versions``), from the membership
  machine's request value where one exists (:class:`kgroup.membership.HeartbeatRequest`,
  :class:`~kgroup.membership.JoinGroupRequest`, :class:`~kgroup.membership.SyncGroupRequest`,
  or the :class:`~kgroup.membership.SendClassicHeartbeat` and
  :class:`~kgroup.membership.SendLeaveGroup` actions themselves) or from plain
  typed arguments;
- ``Response``: the union of kio's response classes over the versions kgroup
  negotiates, defined under ``TYPE_CHECKING`` (only the version a broker answers
  with is imported at run time), and ``narrow(payload) -> Response`` (a
  :class:`~kgroup.protocol.requests._common.Narrow`), which checks that what the
  transport returned is one of them (:class:`~kgroup.errors.KafkaProtocolError`
  otherwise);
- ``parse(response) -> <typed value>``: the fields kgroup needs, as plain values
  (:class:`~kgroup.membership.HeartbeatResponse`,
  :class:`~kgroup.protocol.cluster.ClusterMetadata` ...).

:mod:`~kgroup.protocol.requests.api_versions` is the exception that builds from
a version number: it is what negotiates the versions.

These modules import kio, :mod:`kgroup.membership` value types and
:mod:`kgroup.types`; never anyio or the transport. Nothing outside
:mod:`kgroup.protocol` builds a kio request. A new API gets a new module here,
a row in :data:`kgroup.protocol.apis.SUPPORTED_VERSIONS` and a unit test that
builds it at the lowest and highest supported version.

Submodules are imported by name (``from kgroup.protocol.requests import join_group``);
this package imports none of them, so that :mod:`kgroup.protocol.negotiation`
can use :mod:`~kgroup.protocol.requests.api_versions` without a cycle.
"""
