"""The share data path's pure parts (KIP-932): sessions, acknowledgements, acquired records.

Sans-IO: nothing here opens a socket or reads a clock (time is passed in).
The modules turn ShareFetch responses into records and acknowledgements into
the next request's fields; a later protocol module encodes those for kio and
the runtime sends them.

- :mod:`.session`: one share session per leader (epochs, incremental requests,
  forgotten partitions, resets on session errors, close).
- :mod:`.acknowledgements`: acknowledgement types per offset, coalesced into the
  wire's acknowledgement batches; per-partition commit results.
- :mod:`.inflight`: acquired ranges matched to decoded records, delivery counts,
  gaps, the implicit and explicit acknowledgement modes, the byte bound.
- :mod:`.records`: record batches decoded (every codec) into :class:`ShareRecord`.

Imports only the standard library, kio, cramjam (and kio's crc32c),
``kgroup.types``, ``kgroup.errors`` and ``kgroup.error_codes``.
"""
