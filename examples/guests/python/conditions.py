"""A policy on contract 0.2.0: the default mapping of app.py, plus an `ImagePinned` condition
(True when the image is pinned by digest) and, when it is not, a Warning Event `ImageNotPinned`.
The same report as the Rust example in examples/guests/conditions.

Built with componentize-py against wit/0.2.0 (hack/guests/build.sh): `app.py`'s records are the
same in 0.2.0, so its `render` is reused as it is.
"""

from wit_world import exports
from wit_world.imports.types import (
    AppService, Condition, ConditionStatus, Event, EventType, Rendering,
)

import app as mapping  # the 0.1.0 example's render()


class Policy(exports.Policy):
    """The contract's `policy` export, at 0.2.0."""

    def render(self, app: AppService) -> Rendering:
        objects = mapping.render(app)  # raises Err(PolicyError_...) to refuse
        image = app.spec.image
        pinned = "@sha256:" in image
        condition = Condition(
            type="ImagePinned",
            status=ConditionStatus.TRUE if pinned else ConditionStatus.FALSE,
            reason="PinnedByDigest" if pinned else "NotPinned",
            message=f"{image} is {'' if pinned else 'not '}pinned by digest",
        )
        events = [] if pinned else [
            Event(type=EventType.WARNING, reason="ImageNotPinned",
                  note=f"image {image} is not pinned by digest"),
        ]
        return Rendering(objects=objects, conditions=[condition], events=events)
