"""Hypothesis strategies for kio's types that Hypothesis cannot build on its own.

Every test module that builds kio values with ``st.from_type`` / ``st.builds``
imports this module: a strategy registered inside one test module exists only
once that module was imported, so another module run on its own would fail
where the whole run passes.
"""

from __future__ import annotations

from hypothesis import strategies as st
from kio.static.primitive import Records

# ShareFetch's record bytes are kio's phantom ``Records`` type, which Hypothesis
# cannot build on its own: any bytes are a valid value of the field.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records.parse))
