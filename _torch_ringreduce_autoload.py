"""Entry point that `import torch` calls to register the ringreduce backend.

It lives outside the package on purpose: loading `torch_ringreduce:...` would
import the package (and its compiled extension) before any try/except could
run, and an exception there would break `import torch` for every program.
"""


def load():
    try:
        import torch_ringreduce  # noqa: F401  (registers the backend)
    except Exception as error:  # a broken install must not break torch
        import warnings

        warnings.warn(
            f"torch_ringreduce could not be loaded ({type(error).__name__}: {error}); "
            "the 'ringreduce' backend is unavailable. Set TORCH_DEVICE_BACKEND_AUTOLOAD=0 "
            "to skip this check.",
            RuntimeWarning,
            stacklevel=2,
        )
