"""The share consumer's runtime (KIP-932 share groups).

- :mod:`.config`: :class:`ShareConsumerConfig`, the validated config.
- :mod:`.core`: :class:`ShareCore`, the sans-IO runtime: given what happened
  (a heartbeat answered, metadata learned, a fetch answered, the application
  consumed or acknowledged, time passed) it says which requests to send.
- :mod:`.driver`: :class:`ShareDriver`, the anyio executor of the core.

The application-facing classes are :class:`kgroup.ShareConsumer` (threads) and
:class:`kgroup.AsyncShareConsumer` (the caller's event loop).
"""
