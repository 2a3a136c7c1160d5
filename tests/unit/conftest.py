"""Hypothesis strategies every unit test module may need, registered once for the run.

A strategy registered inside one module exists only once that module was
imported: a module run on its own then fails where the whole run passes.
"""

from __future__ import annotations

from hypothesis import strategies as st
from kio.static.primitive import Records

# ShareFetch's record bytes are kio's phantom ``Records`` type, which Hypothesis
# cannot build on its own: any bytes are a valid value of the field.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records.parse))
