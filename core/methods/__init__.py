"""Importing this package registers every method in ``core.registry`` (registration order = display order)."""

from core.methods import exact  # noqa: F401  (first: the reference)
from core.methods import performer  # noqa: F401
from core.methods import lsh  # noqa: F401
from core.methods import local  # noqa: F401
from core.methods import scatterbrain  # noqa: F401
from core.methods import vcc  # noqa: F401
from core.methods import nystrom  # noqa: F401
from core.methods import linformer  # noqa: F401
from core.methods import oracles  # noqa: F401
from core.methods import learned_kernel  # noqa: F401  (registers learned_kernel and linear_elu)
