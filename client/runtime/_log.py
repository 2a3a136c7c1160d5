"""The runtime's logger: every runtime module logs as ``kgroup.runtime``.

One name for the driver, both sessions and the protocol choice, so that an
application follows a consumer's group life under one logger.
"""

import logging

log = logging.getLogger("kgroup.runtime")
