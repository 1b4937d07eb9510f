"""attnkit: look inside the attention of transformer language models from a notebook."""

from . import errors
from .attention import Attention

__version__ = "0.1.0"

__all__ = ["Attention", "errors", "__version__"]
