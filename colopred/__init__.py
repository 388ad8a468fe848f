"""colopred: predict the slowdown of deep-learning training jobs collocated on one GPU."""

from .errors import ColopredError, InputError
from .gpu import GpuInfo
from .profile import JobProfile, load_profiles

__version__ = "0.1.0"

__all__ = ["ColopredError", "GpuInfo", "InputError", "JobProfile", "load_profiles", "__version__"]
