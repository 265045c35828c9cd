"""Importing this package registers every method in ``core.registry`` (registration order = display order)."""

from core.approximators import exact  # noqa: F401  (first: the reference)
from core.approximators import performer  # noqa: F401
from core.approximators import lsh  # noqa: F401
from core.approximators import local  # noqa: F401
from core.approximators import scatterbrain  # noqa: F401
from core.approximators import vcc  # noqa: F401
from core.approximators import nystrom  # noqa: F401
from core.approximators import linformer  # noqa: F401
from core.approximators import oracles  # noqa: F401
from core.approximators import learned_kernel  # noqa: F401  (registers learned_kernel and linear_elu)
from core.approximators import nsa  # noqa: F401
from core.approximators import moba  # noqa: F401
from core.approximators import hedgehog  # noqa: F401
from core.approximators import based  # noqa: F401
